package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/gitview"
)

// A user clones an app's git view from the bridge with the reader token,
// and git log lists its releases with the commits bucketops log shows;
// rollback --to takes one of those commits. The plugin, run in the
// checked-out directory, renders exactly the release its revision names.
func TestGitViewThroughTheBridge(t *testing.T) {
	b := startBridge(t)
	env := map[string]string{}
	for _, kv := range b.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	token, err := os.ReadFile(env["BUCKETOPS_TOKEN_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"one", "two", "three"} {
		b.bucketops(t, configMap(v), "push", "prod/web", "-", "--sequence", string(rune('1'+i)), "--author", "Ada <ada@example.com>", "-m", "release "+v)
	}
	var entries []struct {
		Generation int64  `json:"generation"`
		Digest     string `json:"digest"`
		Commit     string `json:"commit"`
	}
	if err := json.Unmarshal([]byte(b.bucketops(t, "", "log", "prod/web", "-o", "json")), &entries); err != nil {
		t.Fatal(err)
	}

	u, _ := url.Parse(b.url + "/git/prod/web.git")
	dir := t.TempDir()
	git := func(wd string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_TERMINAL_PROMPT=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Without the token, refused; with it as the password, cloned.
	cmd := exec.Command("git", "clone", "-q", u.String(), filepath.Join(dir, "denied"))
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a clone without the token succeeded: %s", out)
	}
	u.User = url.UserPassword("bucketops", strings.TrimSpace(string(token)))
	git(dir, "clone", "-q", u.String(), "web")
	clone := filepath.Join(dir, "web")
	log := strings.Fields(git(clone, "log", "--format=%H"))
	if len(log) != 3 {
		t.Fatalf("git log lists %d commits, want 3", len(log))
	}
	for i, e := range entries {
		if e.Commit != log[i] {
			t.Errorf("release %d: bucketops log says commit %s, git log %s", e.Generation, e.Commit, log[i])
		}
	}
	if who := strings.TrimSpace(git(clone, "log", "-1", "--format=%an <%ae> %s")); who != "Ada <ada@example.com> release three" {
		t.Errorf("the head commit: %q", who)
	}

	// What the view keeps of the history is on /metrics, for an operator
	// to hold against --history-cache-bytes.
	resp, err := http.Get(b.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`(?m)^bucketops_gitview_cache_bytes (\d+)`).FindSubmatch(metrics); m == nil || string(m[1]) == "0" {
		t.Errorf("/metrics: bucketops_gitview_cache_bytes %q, want the bytes of prod/web's commits", m)
	}
	if !regexp.MustCompile(`(?m)^bucketops_ui_history_cache_bytes \d+`).Match(metrics) {
		t.Error("/metrics lacks bucketops_ui_history_cache_bytes")
	}

	// The plugin renders the release of the revision checked out, not the
	// head.
	git(clone, "checkout", "-q", log[2])
	plugin := exec.Command(filepath.Join(binDir, "bucketops"), "plugin", "generate")
	plugin.Dir = clone
	plugin.Env = append(os.Environ(), b.env...)
	out, err := plugin.Output()
	if err != nil || !strings.Contains(string(out), `value: "one"`) {
		t.Errorf("plugin generate at the first release's commit: %v\n%s", err, out)
	}

	// Roll back to the first release by its commit.
	b.bucketops(t, "", "rollback", "prod/web", "--to", gitview.ShortSHA(log[2], 12))
	if err := json.Unmarshal([]byte(b.bucketops(t, "", "log", "prod/web", "-o", "json")), &entries); err != nil {
		t.Fatal(err)
	}
	if entries[0].Digest != entries[3].Digest {
		t.Errorf("after rollback --to %s the head's digest is %s, want the first release's %s", gitview.ShortSHA(log[2], 12), entries[0].Digest, entries[3].Digest)
	}
}
