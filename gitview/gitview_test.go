package gitview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// repo is a bucket served through the git view over HTTP.
type repo struct {
	store *store.Store
	view  *gitview.View
	url   string // the server's root; an app is url/APP.git
}

func newRepo(t testing.TB, wrap func(http.Handler) http.Handler) *repo {
	t.Helper()
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	v, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := v.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &repo{store: st, view: v, url: srv.URL}
}

func (r *repo) publish(t testing.TB, app string, n int, author, message string) store.Result {
	t.Helper()
	res, err := r.store.Publish(context.Background(), app, store.Publication{
		Data:     fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  n: %q\n", strconv.Itoa(n)),
		Sequence: uint64(n), Author: author, Message: message, Source: fmt.Sprintf("acme/app@%040d", n),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// git runs the git CLI with no system or user configuration.
func runGit(t testing.TB, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String() + errb.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func mustGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := runGit(t, dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCloneLogAndIncrementalFetch(t *testing.T) {
	r := newRepo(t, nil)
	app := "prod/payments"
	var gens []int64
	for n := 1; n <= 3; n++ {
		gens = append(gens, r.publish(t, app, n, fmt.Sprintf("CI Bot <ci-%d@example.com>", n), fmt.Sprintf("release %d\n\nwith a body", n)).Generation)
	}
	dir := t.TempDir()
	mustGit(t, dir, "clone", "-q", r.url+"/"+app+".git", "clone")
	clone := filepath.Join(dir, "clone")
	out := mustGit(t, clone, "log", "--format=%an|%ae|%s|%(trailers:key=Bucketops-Generation,valueonly,separator=)")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("git log shows %d commits, want 3:\n%s", len(lines), out)
	}
	for i, line := range lines {
		n := 3 - i
		want := fmt.Sprintf("CI Bot|ci-%d@example.com|release %d|%d", n, n, gens[n-1])
		if line != want {
			t.Errorf("commit %d: %q, want %q", i, line, want)
		}
	}
	var f gitview.ReleaseFile
	data, err := os.ReadFile(filepath.Join(clone, gitview.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if f, err = gitview.ParseReleaseFile(data); err != nil || f.Generation != gens[2] || f.App != app || f.Sequence != 3 {
		t.Errorf("release.json of the head: %+v %v", f, err)
	}

	// More releases than go-git's server could fetch incrementally (16).
	for n := 4; n <= 40; n++ {
		gens = append(gens, r.publish(t, app, n, "ci@example.com", "").Generation)
	}
	// Only what the clone lacks comes over: a commit, a tree and a blob per
	// new release.
	fetch := exec.Command("git", "fetch", "--progress", "origin")
	fetch.Dir = clone
	fetch.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_TERMINAL_PROMPT=0")
	progress, err := fetch.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, progress)
	}
	out = string(progress)
	if want := fmt.Sprintf("(%d/%d)", 37*3, 37*3); !strings.Contains(out, "objects: 100% "+want) {
		t.Errorf("an incremental fetch of 37 releases: want %s objects:\n%s", want, out)
	}
	mustGit(t, clone, "merge", "-q", "--ff-only", "origin/main")
	if got := strings.TrimSpace(mustGit(t, clone, "rev-list", "--count", "HEAD")); got != "40" {
		t.Errorf("after the fetch the history has %s commits, want 40", got)
	}
	sha, err := r.view.Commit(context.Background(), app, gens[39])
	if err != nil {
		t.Fatal(err)
	}
	if head := strings.TrimSpace(mustGit(t, clone, "rev-parse", "HEAD")); head != sha {
		t.Errorf("HEAD %s, want the newest release's commit %s", head, sha)
	}
	mustGit(t, clone, "fsck", "--strict", "--no-progress")
	if s := mustGit(t, clone, "log", "-1", "--format=%s", "HEAD"); strings.TrimSpace(s) != fmt.Sprintf("Publish %s@%d", app, gens[39]) {
		t.Errorf("a release without message: %q", s)
	}
}

// The git commands Argo CD's repo-server runs (GIT-VIEW.md), against a
// fresh directory: fetch everything, check out a recorded SHA; and fetch
// one SHA into a repository that lacks it.
func TestArgoCDsFetchSequence(t *testing.T) {
	r := newRepo(t, nil)
	app := "prod/web"
	var gens []int64
	for n := 1; n <= 5; n++ {
		gens = append(gens, r.publish(t, app, n, "ci", "").Generation)
	}
	old, err := r.view.Commit(context.Background(), app, gens[1])
	if err != nil {
		t.Fatal(err)
	}
	generationAt := func(dir string) int64 {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, gitview.FileName))
		if err != nil {
			t.Fatal(err)
		}
		f, err := gitview.ParseReleaseFile(data)
		if err != nil {
			t.Fatal(err)
		}
		return f.Generation
	}
	dir := t.TempDir()
	mustGit(t, dir, "init", "-q")
	mustGit(t, dir, "remote", "add", "origin", r.url+"/"+app+".git")
	mustGit(t, dir, "fetch", "origin", "--tags", "--force", "--prune")
	mustGit(t, dir, "checkout", "--force", old)
	mustGit(t, dir, "clean", "-ffdx")
	if g := generationAt(dir); g != gens[1] {
		t.Errorf("checked out %s: release.json names %d, want %d", old, g, gens[1])
	}
	if rev := strings.TrimSpace(mustGit(t, dir, "rev-parse", "HEAD")); rev != old {
		t.Errorf("rev-parse HEAD %s, want %s", rev, old)
	}
	meta := mustGit(t, dir, "show", "-s", "--format=%an <%ae>%n%at%n%B", old)
	if !strings.Contains(meta, fmt.Sprintf("Bucketops-Generation: %d", gens[1])) {
		t.Errorf("revision metadata:\n%s", meta)
	}

	// A repository that lacks the SHA (a shallow one, say) fetches it by SHA.
	lean := t.TempDir()
	mustGit(t, lean, "init", "-q")
	mustGit(t, lean, "remote", "add", "origin", r.url+"/"+app+".git")
	if out, err := runGit(t, lean, nil, "checkout", "--force", old); err == nil {
		t.Fatalf("checkout of a SHA never fetched succeeded: %s", out)
	}
	mustGit(t, lean, "fetch", "origin", old, "--tags", "--force", "--prune")
	mustGit(t, lean, "checkout", "--force", "FETCH_HEAD")
	if g := generationAt(lean); g != gens[1] {
		t.Errorf("fetched %s by SHA: release.json names %d, want %d", old, g, gens[1])
	}
}

func TestShallowCloneAndDeepen(t *testing.T) {
	r := newRepo(t, nil)
	app := "prod/api"
	for n := 1; n <= 6; n++ {
		r.publish(t, app, n, "ci", "")
	}
	dir := t.TempDir()
	mustGit(t, dir, "clone", "-q", "--depth", "1", r.url+"/"+app+".git", "c")
	c := filepath.Join(dir, "c")
	if n := strings.TrimSpace(mustGit(t, c, "rev-list", "--count", "HEAD")); n != "1" {
		t.Errorf("--depth 1 clone has %s commits, want 1", n)
	}
	r.publish(t, app, 7, "ci", "")
	mustGit(t, c, "fetch", "-q", "--depth", "3")
	if n := strings.TrimSpace(mustGit(t, c, "rev-list", "--count", "origin/main")); n != "3" {
		t.Errorf("after fetch --depth 3: %s commits, want 3", n)
	}
	mustGit(t, c, "fetch", "-q", "--unshallow")
	if n := strings.TrimSpace(mustGit(t, c, "rev-list", "--count", "origin/main")); n != "7" {
		t.Errorf("after fetch --unshallow: %s commits, want 7", n)
	}
	mustGit(t, c, "fsck", "--no-progress")
}

func TestLsRemotePushAndBadRequests(t *testing.T) {
	r := newRepo(t, nil)
	res := r.publish(t, "prod/a", 1, "ci", "")
	other := r.publish(t, "prod/b", 1, "ci", "")
	sha, _ := r.view.Commit(context.Background(), "prod/a", res.Generation)
	out := mustGit(t, t.TempDir(), "ls-remote", "--symref", r.url+"/prod/a.git")
	for _, want := range []string{"ref: refs/heads/main\tHEAD", sha + "\tHEAD", sha + "\trefs/heads/main"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls-remote lacks %q:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	mustGit(t, dir, "clone", "-q", r.url+"/prod/a.git", "c")
	c := filepath.Join(dir, "c")
	os.WriteFile(filepath.Join(c, "x"), []byte("x"), 0o644)
	mustGit(t, c, "add", "x")
	mustGit(t, c, "commit", "-qm", "x")
	if out, err := runGit(t, c, nil, "push", "origin", "HEAD:main"); err == nil || !strings.Contains(out, "read-only view") {
		t.Errorf("push: %v\n%s; want refused as a read-only view", err, out)
	}

	// One repository per app: another app's commit can't be fetched here.
	otherSHA, _ := r.view.Commit(context.Background(), "prod/b", other.Generation)
	if out, err := runGit(t, c, nil, "fetch", "origin", otherSHA); err == nil || !strings.Contains(out, "not our ref") {
		t.Errorf("fetch of prod/b's commit from prod/a: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		mention            string
	}{
		{"GET", "/prod/none.git/info/refs?service=git-upload-pack", "", 404, "no app prod/none"},
		{"GET", "/Prod/A.git/info/refs?service=git-upload-pack", "", 400, "invalid app"},
		{"GET", "/prod/a.git/info/refs", "", 403, "smart HTTP"},
		{"GET", "/prod/a.git/info/refs?service=git-receive-pack", "", 403, "read-only"},
		{"POST", "/prod/a.git/git-upload-pack", "not pkt-lines", 400, "malformed upload-pack request"},
		{"POST", "/prod/a.git/git-upload-pack", "0000", 400, "no want"},
		{"GET", "/prod/a.git/objects/info/packs", "", 404, "smart HTTP protocol"},
		{"GET", "/prod/%2e%2e/a.git/info/refs?service=git-upload-pack", "", 400, "percent-encoded"},
	} {
		req, _ := http.NewRequest(tc.method, r.url+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(b.String(), tc.mention) {
			t.Errorf("%s %s: %d %q, want %d mentioning %q", tc.method, tc.path, resp.StatusCode, b.String(), tc.status, tc.mention)
		}
	}
}

// Argo CD sends repository credentials the way git's askpass helper does:
// only after a 401 with WWW-Authenticate: Basic. go-git (Argo CD's
// ls-remote) sends them up front, and resolves HEAD through the symref.
func TestBasicAuthThroughAskpassAndGoGit(t *testing.T) {
	const password = "reader-token-0123456789abcdef"
	r := newRepo(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if _, p, ok := req.BasicAuth(); !ok || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="bucketops"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	res := r.publish(t, "prod/a", 1, "ci", "")
	sha, _ := r.view.Commit(context.Background(), "prod/a", res.Generation)
	askpass := filepath.Join(t.TempDir(), "askpass.sh")
	os.WriteFile(askpass, []byte("#!/bin/sh\ncase \"$1\" in Username*) echo bucketops;; *) echo \"$BUCKETOPS_PASSWORD\";; esac\n"), 0o755)
	dir := t.TempDir()
	if out, err := runGit(t, dir, nil, "clone", "-q", r.url+"/prod/a.git", "denied"); err == nil {
		t.Fatalf("a clone without credentials succeeded: %s", out)
	}
	if _, err := runGit(t, dir, []string{"GIT_ASKPASS=" + askpass, "BUCKETOPS_PASSWORD=" + password}, "clone", "-q", r.url+"/prod/a.git", "c"); err != nil {
		t.Fatal(err)
	}

	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{r.url + "/prod/a.git"}})
	refs, err := remote.List(&git.ListOptions{Auth: &githttp.BasicAuth{Username: "argocd", Password: password}})
	if err != nil {
		t.Fatal(err)
	}
	var head *plumbing.Reference
	for _, ref := range refs {
		if ref.Name() == plumbing.HEAD {
			head = ref
		}
	}
	if head == nil || head.Type() != plumbing.SymbolicReference || head.Target() != plumbing.ReferenceName(gitview.Branch) {
		t.Errorf("HEAD as go-git lists it: %v, want a symbolic reference to %s", head, gitview.Branch)
	}
	for _, ref := range refs {
		if ref.Name() == plumbing.ReferenceName(gitview.Branch) && ref.Hash().String() != sha {
			t.Errorf("%s at %s, want %s", gitview.Branch, ref.Hash(), sha)
		}
	}
}

// Three clients fetch over and over while releases land: every fetch
// works, and each generation has one SHA whoever computes it.
func TestFetchesWhileReleasesLand(t *testing.T) {
	r := newRepo(t, nil)
	app := "prod/busy"
	r.publish(t, app, 1, "ci", "")
	var clones []string
	for range 3 {
		dir := t.TempDir()
		mustGit(t, dir, "clone", "-q", r.url+"/"+app+".git", "c")
		clones = append(clones, filepath.Join(dir, "c"))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]string{} // generation → SHA
	for _, c := range clones {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := runGit(t, c, nil, "fetch", "-q", "origin"); err != nil {
					t.Error(err)
					return
				}
				out, err := runGit(t, c, nil, "log", "--format=%H %(trailers:key=Bucketops-Generation,valueonly,separator=)", "origin/main")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					sha, gen, _ := strings.Cut(line, " ")
					if prev, ok := seen[gen]; ok && prev != sha {
						t.Errorf("generation %s is %s and %s", gen, prev, sha)
					}
					seen[gen] = sha
				}
				mu.Unlock()
			}
		})
	}
	for n := 2; n <= 25; n++ {
		r.publish(t, app, n, "ci", "")
	}
	close(stop)
	wg.Wait()
	hist, _ := r.store.History(context.Background(), app, store.HistoryOptions{})
	for _, rel := range hist {
		sha, ok := seen[strconv.FormatInt(rel.Generation, 10)]
		if !ok {
			continue
		}
		if want, _ := r.view.Commit(context.Background(), app, rel.Generation); want != sha {
			t.Errorf("generation %d fetched as %s, the view says %s", rel.Generation, sha, want)
		}
	}
}

func TestReleaseFileRoundTripsAndRejectsForeignFiles(t *testing.T) {
	f := gitview.NewReleaseFile(store.Location{Bucket: "b", Prefix: "p"}, store.Release{
		App: "prod/x", Generation: 7, Digest: "sha256:00", Sequence: 3, Kind: "release", Author: "a <b@c>", Message: "m\n<html>", Time: time.Unix(1700000000, 5).UTC(),
	})
	data := f.Encode()
	if !bytes.Contains(data, []byte(`"message": "m\n<html>"`)) || !bytes.HasSuffix(data, []byte("}\n")) {
		t.Errorf("encoded:\n%s", data)
	}
	back, err := gitview.ParseReleaseFile(data)
	if err != nil || back != f {
		t.Errorf("round trip: %+v %v", back, err)
	}
	var m map[string]any
	json.Unmarshal(data, &m)
	delete(m, "digest")
	missing, _ := json.Marshal(m)
	for name, bad := range map[string][]byte{
		"missing field": missing,
		"unknown field": bytes.Replace(data, []byte(`"bucket"`), []byte(`"extra": 1, "bucket"`), 1),
		"bad app":       bytes.Replace(data, []byte(`prod/x`), []byte(`../x`), 1),
		"not JSON":      []byte("apiVersion: v1\n"),
	} {
		if _, err := gitview.ParseReleaseFile(bad); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
