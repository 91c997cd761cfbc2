//go:build e2e

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

	out, code := push(t, "signed/web", release(t, "signed-web", "v2", "s3cr3t"), "--sequence", "2")
	if code != 5 {
		t.Errorf("unsigned push --wait: exit %d, want 5 (not deployed)\n%s", code, out)
	}
	waitForCondition(t, "signed-web", "untrusted_release", "missing_signature")
	if ok, detail := hasValue(t, "signed-web", "v1")(); !ok {
		t.Errorf("the signed release is no longer live: %s", detail)
	}
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
}
