//go:build e2e

package integration

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/store"
)

// TestSigning follows docs/signing.md against the real Argo CD: keygen, a
// trust policy requiring signatures under signed/, a signed release
// deployed, then an unsigned one refused while the signed one stays live.
func TestSigning(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "ci-2026")
	if out, errOut, code := st.bucketops("", "keygen", "--out", key); code != 0 {
		t.Fatalf("keygen: exit %d %s%s", code, out, errOut)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	trust := filepath.Join(dir, "trust.yaml")
	os.WriteFile(trust, fmt.Appendf(nil, `keys:
  ci-2026: |
    %s
rules:
  - prefix: signed
    require: signed
    keys: [ci-2026]
  - prefix: ""
    require: "off"
`, strings.ReplaceAll(strings.TrimSpace(string(pub)), "\n", "\n    ")), 0o644)
	if err := st.restartBridge("--trust-policy", trust); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.restartBridge(); err != nil {
			t.Errorf("restarting the bridge without the trust policy: %v", err)
		}
	})
	createApplication(t, "signed-web", "signed/web", "signed-web")

	if out, code := push(t, "signed/web", release(t, "signed-web", "v1", "s3cr3t"), "--sign-key", key+".key", "--sequence", "1"); code != 0 {
		t.Fatalf("signed push: exit %d\n%s", code, out)
	}
	if ok, detail := hasValue(t, "signed-web", "v1")(); !ok {
		t.Fatal(detail)
	}
	good := headOf(t, "signed/web")

	out, code := push(t, "signed/web", release(t, "signed-web", "v2", "s3cr3t"), "--sequence", "2")
	if code != 5 {
		t.Errorf("unsigned push --wait: exit %d, want 5 (not deployed)\n%s", code, out)
	}
	// The condition names the release, the rule and what to do.
	unsigned := headOf(t, "signed/web")
	waitForCondition(t, "signed-web", fmt.Sprintf("signed/web@%d: not signed, and trust rule %q accepts only releases signed by its keys; "+
		"publish it signed: bucketops push signed/web DIR --sign-key KEY [untrusted_release: missing_signature]", unsigned.Generation, "signed"))
	if ok, detail := hasValue(t, "signed-web", "v1")(); !ok {
		t.Errorf("the signed release is no longer live: %s", detail)
	}
	lastDeployed(t, "signed-web", good.Commit)
	if sec, _ := st.kube.secretData("signed-web", "credentials"); sec["password"] != "s3cr3t" {
		t.Errorf("the Secret changed or was pruned: %v", sec)
	}
	vout, verr, vcode := st.bucketops("", "verify", "signed/web", "--chain", "--trust-policy", trust)
	if vcode != 6 || !strings.Contains(vout, "missing_signature") {
		t.Errorf("verify --chain: exit %d %s%s, want 6 naming the unsigned release", vcode, vout, verr)
	}

	// The next signed release heals it.
	if out, code := push(t, "signed/web", release(t, "signed-web", "v3", "s3cr3t"), "--sign-key", key+".key", "--sequence", "3"); code != 0 {
		t.Fatalf("signed push after the refused one: exit %d\n%s", code, out)
	}
	if ok, detail := hasValue(t, "signed-web", "v3")(); !ok {
		t.Error(detail)
	}

	// Issue 24 item 3: with delete rights and no key, the tail is deleted
	// and the first signed release copied back as the head. Its signature
	// and link verify; the rollback floor refuses it, on the real Argo CD,
	// and v3 stays live.
	rollBackBehindCLI(t, "signed/web")
	waitForCondition(t, "signed-web", "older than the app's rollback floor signed/web@", "publish a signed rollback: bucketops rollback signed/web --to GEN --sign-key KEY", "[rollback_refused]")
	if ok, detail := hasValue(t, "signed-web", "v3")(); !ok {
		t.Errorf("the rolled back head replaced the newer release: %s", detail)
	}
	vout, verr, vcode = st.bucketops("", "verify", "signed/web", "--chain", "--trust-policy", trust)
	if vcode != 7 || !strings.Contains(vout, "truncated") || !strings.Contains(vout, "rollback") {
		t.Errorf("verify --chain after the rollback: exit %d %s%s, want 7 naming truncated and rollback", vcode, vout, verr)
	}
}

// headOf is app's newest release, as bucketops log shows it.
func headOf(t *testing.T, app string) releaseLog {
	t.Helper()
	out, errOut, code := st.bucketops("", "log", app, "-o", "json", "--limit", "1")
	var l []releaseLog
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l) == 0 {
		t.Fatalf("log %s: exit %d %s%s", app, code, out, errOut)
	}
	return l[0]
}

// lastDeployed checks that the Application's last sync, in its History,
// is still the commit of the release it ran before a refusal.
func lastDeployed(t *testing.T, name, commit string) {
	t.Helper()
	a, err := st.kube.application(name)
	switch {
	case err != nil:
		t.Error(err)
	case len(a.Status.History) == 0:
		t.Errorf("%s: no History", name)
	case a.Status.History[len(a.Status.History)-1].Revision != commit:
		t.Errorf("%s: last deployed %s, want %s (the last good release's commit)", name, a.Status.History[len(a.Status.History)-1].Revision, commit)
	}
}

// rollBackBehindCLI does through the GCS API what a holder of delete
// rights can: keep app's first release, delete every generation, and copy
// the first back as the head.
func rollBackBehindCLI(t *testing.T, app string) {
	t.Helper()
	client, loc := bucketBehindCLI(t)
	hist, err := store.New(client, loc, slog.New(slog.DiscardHandler)).History(t.Context(), app, store.HistoryOptions{})
	if err != nil || len(hist) < 2 {
		t.Fatalf("history of %s: %d releases, %v", app, len(hist), err)
	}
	name := app + "/" + store.ObjectName
	if loc.Prefix != "" {
		name = loc.Prefix + "/" + name
	}
	bucket := client.Bucket(loc.Bucket)
	first := hist[len(hist)-1] // newest first
	kept := bucket.Object(name + ".kept")
	if _, err := kept.CopierFrom(bucket.Object(name).Generation(first.Generation)).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if err := bucket.Object(name).Generation(r.Generation).Delete(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bucket.Object(name).CopierFrom(kept).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
}
