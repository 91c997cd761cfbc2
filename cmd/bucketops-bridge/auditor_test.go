package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditorTokenFile: --token-file auditor=.../alice.token gives alice a
// token of her own: it reads the apps and the activity export, logs in to
// the pages as alice, is refused the manifests, and the bridge's log names
// her on each request, never printing the token.
func TestAuditorTokenFile(t *testing.T) {
	dir := t.TempDir()
	const plugin, alice = "plugin-token-0123456789abcdef", "auditor-token-alice-0123456789abcdef"
	for name, secret := range map[string]string{"plugin": plugin, "alice.token": alice} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := startBridge(t, "--token-file", "plugin="+filepath.Join(dir, "plugin"), "--token-file", "auditor="+filepath.Join(dir, "alice.token"))
	b.bucketops(t, configMap("1"), "push", "prod/payments", "-", "--sequence", "1")

	for path, want := range map[string]int{
		"/v1/apps":                            200,
		"/ui/activity?format=csv":             200,
		"/v1/apps/prod/payments/-/manifests":  403,
		"/v1/apps/prod/payments/-/releases":   200,
		"/ui/activity?format=json&prefix=dev": 200,
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s with alice's token: %d, want %d", path, resp.StatusCode, want)
		}
	}
	session := login(t, b.url, alice)
	if code, _ := pageStatus(t, b.url, "/ui/apps", session); code != http.StatusOK {
		t.Errorf("the pages with alice's session: %d", code)
	}
	b.stop(t)
	logs := b.stderr.String()
	if n := strings.Count(logs, "auditor=alice method="); n != 7 {
		t.Errorf("%d access log lines naming alice, want 7 (5 API and export requests, the login, a page):\n%s", n, logs)
	}
	if strings.Contains(logs, alice) {
		t.Errorf("the bridge's log holds alice's token")
	}
}
