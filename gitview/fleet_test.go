package gitview_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/bucketops/bucketops/gitview"
)

// packCounter counts the objects of the packs a handler sends.
type packCounter struct {
	mu sync.Mutex
	n  int
}

func (c *packCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		// The pack is side-band 1 of the pkt-lines after the ACKs and NAKs;
		// its header: PACK, version 2, the object count.
		var data []byte
		sc := pktline.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			if line := sc.Bytes(); len(line) > 0 && line[0] == 1 {
				data = append(data, line[1:]...)
			}
		}
		if i := bytes.Index(data, []byte("PACK\x00\x00\x00\x02")); i >= 0 && len(data) >= i+12 {
			c.mu.Lock()
			c.n += int(binary.BigEndian.Uint32(data[i+8 : i+12]))
			c.mu.Unlock()
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// fetch runs Argo CD's fetch in dir and returns how many objects the
// server sent.
func (c *packCounter) fetch(t *testing.T, dir string) int {
	t.Helper()
	c.mu.Lock()
	c.n = 0
	c.mu.Unlock()
	mustGit(t, dir, "fetch", "origin", "--tags", "--force", "--prune")
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// The fleet repository, fetched the way Argo CD's repo-server fetches:
// one branch per app at the app's own commits, one fetch bringing every
// app's new releases and only those, a checkout of one app's SHA giving
// that app's release.json.
func TestFleetRepositoryFetchesEveryAppOnce(t *testing.T) {
	var sent packCounter
	r := newRepo(t, sent.wrap)
	ctx := context.Background()
	heads := map[string]int64{}
	// prod and prod/payments: an app whose path is another's directory.
	for app, n := range map[string]int{"prod": 3, "prod/payments": 2, "staging/web": 1} {
		for i := 1; i <= n; i++ {
			heads[app] = r.publish(t, app, i, "ci", "").Generation
		}
	}
	shaOf := func(app string) string {
		t.Helper()
		sha, err := r.view.Commit(ctx, app, heads[app])
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	url := gitview.FleetURL(r.url, "")
	dir := t.TempDir()
	mustGit(t, dir, "init", "-q")
	mustGit(t, dir, "remote", "add", "origin", url)
	if got, want := sent.fetch(t, dir), (3+2+1)*3; got != want {
		t.Errorf("first fetch: %d objects, want %d (a commit, a tree and a blob per release)", got, want)
	}
	for app := range heads {
		ref := "refs/remotes/origin/" + gitview.FleetRevision(app)
		if got := strings.TrimSpace(mustGit(t, dir, "rev-parse", ref)); got != shaOf(app) {
			t.Errorf("%s is %s, want %s's own commit %s", ref, got, app, shaOf(app))
		}
	}
	mustGit(t, dir, "checkout", "--force", shaOf("prod/payments"))
	mustGit(t, dir, "clean", "-ffdx")
	data, err := os.ReadFile(filepath.Join(dir, gitview.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := gitview.ParseReleaseFile(data); err != nil || f.App != "prod/payments" || f.Generation != heads["prod/payments"] {
		t.Errorf("release.json at prod/payments' SHA: %+v %v", f, err)
	}

	// More releases of one app than one round of haves (16), one of
	// another, and a new app: one fetch, and only what the clone lacks.
	for i := 3; i <= 22; i++ {
		heads["prod/payments"] = r.publish(t, "prod/payments", i, "ci", "").Generation
	}
	heads["staging/web"] = r.publish(t, "staging/web", 2, "ci", "").Generation
	heads["staging/api"] = r.publish(t, "staging/api", 1, "ci", "").Generation
	if got, want := sent.fetch(t, dir), (20+1+1)*3; got != want {
		t.Errorf("second fetch: %d objects, want %d", got, want)
	}
	for app := range heads {
		if got := strings.TrimSpace(mustGit(t, dir, "rev-parse", "refs/remotes/origin/"+gitview.FleetRevision(app))); got != shaOf(app) {
			t.Errorf("after the second fetch %s is at %s, want %s", app, got, shaOf(app))
		}
	}
	mustGit(t, dir, "fsck", "--strict", "--no-progress")
	if got := sent.fetch(t, dir); got != 0 {
		t.Errorf("a fetch with nothing new brought %d objects", got)
	}

	// A prefix's fleet repository holds the apps under it and no other.
	out := mustGit(t, t.TempDir(), "ls-remote", gitview.FleetURL(r.url, "prod"))
	for _, want := range []string{shaOf("prod") + "\trefs/heads/prod/-", shaOf("prod/payments") + "\trefs/heads/prod/payments/-"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls-remote of prod's fleet repository lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "staging") || strings.Contains(out, "HEAD") {
		t.Errorf("prod's fleet repository holds apps outside prod/ or a HEAD:\n%s", out)
	}

	// go-git, Argo CD's ls-remote, resolves an app's branch.
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := remote.List(&git.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ref := range refs {
		if ref.Name().Short() == gitview.FleetRevision("staging/api") {
			found = ref.Hash().String() == shaOf("staging/api")
		}
	}
	if !found {
		t.Errorf("go-git's ls-remote of the fleet repository: no branch %s at %s in %v", gitview.FleetRevision("staging/api"), shaOf("staging/api"), refs)
	}

	// A SHA no app has is refused by name.
	if out, err := runGit(t, dir, nil, "fetch", "origin", strings.Repeat("ab", 20)); err == nil || !strings.Contains(out, "not our ref") {
		t.Errorf("fetch of an unknown SHA: %v\n%s", err, out)
	}
}

func TestFleetRevisionAndURL(t *testing.T) {
	for _, app := range []string{"prod", "prod/payments", "a/b/c-1.x"} {
		if got, ok := gitview.FleetApp(gitview.FleetRevision(app)); !ok || got != app {
			t.Errorf("FleetApp(FleetRevision(%q)) = %q, %v", app, got, ok)
		}
		if got, ok := gitview.FleetApp("refs/heads/" + gitview.FleetRevision(app)); !ok || got != app {
			t.Errorf("FleetApp(refs/heads/…%q) = %q, %v", app, got, ok)
		}
	}
	for _, rev := range []string{"main", "HEAD", "prod/payments", "/-", "Prod/-", "0123456789abcdef0123456789abcdef01234567"} {
		if app, ok := gitview.FleetApp(rev); ok {
			t.Errorf("FleetApp(%q) = %q, want no app", rev, app)
		}
	}
	for url, want := range map[string]bool{
		gitview.FleetURL("https://bridge/git", ""):     true,
		gitview.FleetURL("https://bridge/git", "prod"): true,
		"https://bridge/git/prod/payments.git":         false,
		"https://bridge/git/prod/-/fleet.git/":         true,
	} {
		if got := gitview.IsFleetURL(url); got != want {
			t.Errorf("IsFleetURL(%q) = %v, want %v", url, got, want)
		}
	}
	if got := gitview.FleetURL("https://bridge/git", "/prod/"); got != "https://bridge/git/prod/-/fleet.git" {
		t.Errorf("FleetURL with a slashed prefix: %s", got)
	}
}
