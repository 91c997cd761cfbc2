//go:build e2e

package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRevisionMetadataNamesTheCICommit: a release whose --source names a
// git commit is a revision whose metadata, as Argo CD's API gives it
// (the server's RevisionMetadata, from the repo-server's git show and git
// interpret-trailers), carries the Bucketops-Source trailer in its message
// and the commit in its references (docs/argocd.md says what it shows).
func TestRevisionMetadataNamesTheCICommit(t *testing.T) {
	const app, ns, name = "prod/traced", "traced", "traced"
	const source = "https://github.com/acme/payments/commit/89abcdef0123456789abcdef0123456789abcdef"
	createApplication(t, name, app, ns)
	if out, code := push(t, app, release(t, ns, "t1", ""), "--source", source, "-m", "deploy t1"); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	head := headOf(t, app)
	var md map[string]any
	eventually(t, "the revision's metadata", 60*time.Second, func() (bool, string) {
		md = nil
		if err := st.argoREST(http.MethodGet, "/api/v1/applications/"+name+"/revisions/"+head.Commit+"/metadata", nil, &md); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	shown, _ := json.MarshalIndent(md, "", "  ")
	t.Logf("Argo CD's RevisionMetadata of %s (%s@%d):\n%s", head.Commit, app, head.Generation, shown)

	message, _ := md["message"].(string)
	for _, want := range []string{"deploy t1", "Bucketops-Source: " + source, "Argocd-reference-commit-sha: 89abcdef0123456789abcdef0123456789abcdef"} {
		if !strings.Contains(message, want) {
			t.Errorf("message doesn't hold %q:\n%s", want, message)
		}
	}
	refs, _ := md["references"].([]any)
	if len(refs) != 1 {
		t.Fatalf("references: %v, want the CI commit", md["references"])
	}
	commit, _ := refs[0].(map[string]any)["commit"].(map[string]any)
	if commit["sha"] != "89abcdef0123456789abcdef0123456789abcdef" || commit["repoUrl"] != "https://github.com/acme/payments" {
		t.Errorf("references[0].commit = %v, want sha 89abcdef… and repoUrl https://github.com/acme/payments", commit)
	}
}
