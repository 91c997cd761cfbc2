package webhook_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/policy/watch"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

// tenants is one bucket, one bridge and one Argo CD for two teams, each
// with its own prefix, project, namespace and age key; the bridge holds
// both keys.
type tenants struct {
	*bridge
	argo           *argocdtest.Server
	keyA, keyB     string // age recipients
	secretA        string // team A's encrypted Secret, in namespace team-a
	plainA, plainB string // the passwords they hold
}

const tenantsPolicy = `rules:
  - prefix: team-a
    projects: [team-a]
    namespaces: [team-a]
    decryptionKeys: [%s]
  - prefix: team-b
    projects: [team-b]
    namespaces: [team-b]
    decryptionKeys: [%s]
    promoteFrom: [staging/team-b]
  - prefix: staging
    projects: ["*"]
    namespaces: ["*"]
`

// teamSecret is a Secret of namespace ns holding password.
func teamSecret(ns, password string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: %s\nstringData:\n  password: %s\n", ns, password)
}

func newTenants(t *testing.T, withPolicy bool) *tenants {
	t.Helper()
	keys := sopstest.NewAgeKeys(t, 2)
	dec, err := secrets.NewDecrypter(sopstest.KeyFile(keys...))
	if err != nil {
		t.Fatal(err)
	}
	tn := &tenants{keyA: keys[0].Recipient().String(), keyB: keys[1].Recipient().String(), plainA: "team-a-s3cret", plainB: "team-b-s3cret"}
	tn.secretA = string(sopstest.EncryptSecret(t, teamSecret("team-a", tn.plainA), tn.keyA))

	bucket := storetest.New(t, true)
	st := bucket.Store(t, "")
	tn.argo = argocdtest.New(t)
	reg := prometheus.NewRegistry()
	d, err := deploy.New(deploy.Config{
		Releases: st, Logger: slog.New(slog.DiscardHandler), Registry: reg,
		Connect: func() (application.ApplicationServiceClient, io.Closer, error) { return tn.argo.ArgoCD(t).Connect() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); !d.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deployer never loaded the fake Argo CD's Applications")
		}
	}
	cfg := webhook.Config{
		Releases: st, Renderer: dec, Logger: slog.New(slog.DiscardHandler), Registry: reg,
		Tokens:  []webhook.Token{webhook.NewToken(webhook.RolePlugin, pluginToken), webhook.NewToken(webhook.RoleReader, readerToken)},
		Deploys: d, Location: st.Location(), CacheBytes: 64 << 20,
	}
	if withPolicy {
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, tenantsPolicy, tn.keyA, tn.keyB), 0o600); err != nil {
			t.Fatal(err)
		}
		w, err := watch.Tenancy(file, slog.New(slog.DiscardHandler), reg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Policy, cfg.Callers = w, d
	}
	srv, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes())
	t.Cleanup(hs.Close)
	tn.bridge = &bridge{url: hs.URL, bucket: bucket, store: st}
	return tn
}

// application puts an Argo CD Application of project deploying app into
// destination.
func (tn *tenants) application(name, project, app, destination string) {
	a := argocdtest.PluginApp(name, "", app)
	a.Spec.Project = project
	a.Spec.Destination.Namespace = destination
	tn.argo.Put(a)
}

// render asks for app's manifests as the plugin does for the Application
// instance (ARGOCD_APP_NAME); "" sends no instance.
func (tn *tenants) render(t *testing.T, app, instance string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tn.url+"/v1/apps/"+app+"/-/manifests", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+pluginToken)
	if instance != "" {
		req.Header.Set(webhook.HeaderApplication, instance)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(body)}
}

// The review's reproduction of hole 3, without a policy: a team with write
// access to the bucket copies another team's encrypted Secret into its own
// app, renames namespace to generateName (the SOPS MAC covers values, not
// key names), and the bridge serves it decrypted; any Application may name
// any app. This is the documented single-tenant behaviour.
func TestWithoutAPolicyEveryWriterIsTrustedWithEverySecret(t *testing.T) {
	tn := newTenants(t, false)
	moved := strings.Replace(tn.secretA, "  namespace: team-a\n", "  generateName: team-a\n", 1)
	tn.publish(t, "team-b/app", moved)
	tn.application("team-b-app", "team-b", "team-b/app", "team-b")
	if r := tn.render(t, "team-b/app", "team-b-app"); r.status != 200 || !strings.Contains(r.body, tn.plainA) {
		t.Fatalf("without a policy the copied Secret isn't served in clear (%d %s): the reproduction no longer holds", r.status, r.body)
	}
}

func TestPolicyBindsAppsToTheirTeam(t *testing.T) {
	tn := newTenants(t, true)
	tn.publish(t, "team-a/app", configMap("settings", "a")+"---\n"+tn.secretA)
	tn.application("team-a-app", "team-a", "team-a/app", "team-a")

	t.Run("team A's Application gets team A's app, decrypted", func(t *testing.T) {
		r := tn.render(t, "team-a/app", "team-a-app")
		if r.status != 200 || !strings.Contains(r.body, tn.plainA) {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	for _, tc := range []struct {
		name, app, instance string
		setup               func(t *testing.T)
		reason, mention     string
		// line is what the line for Argo CD (the body's message) says
		// after the release: the rule and what to do.
		line string
	}{
		{
			name: "an Application of project B naming team A's app", app: "team-a/app", instance: "intruder",
			setup:  func(*testing.T) { tn.application("intruder", "team-b", "team-a/app", "team-b") },
			reason: "policy_project", mention: `Argo CD project \"team-b\" may not deploy this app`,
			line: `refused by tenancy policy rule "team-a": Argo CD project "team-b" may not deploy this app; only "team-a" may: move the Application to one of those projects, or add the project to the rule [policy_project]`,
		},
		{
			name: "a request that names no Application", app: "team-a/app", instance: "",
			reason: "policy_project", mention: "names no Argo CD Application",
			line: `refused by tenancy policy rule "team-a": the request names no Argo CD Application`,
		},
		{
			name: "an Application that doesn't exist", app: "team-a/app", instance: "ghost",
			reason: "policy_project", mention: "no such Application",
		},
		{
			name: "team A's Application asking for another app than its own", app: "team-a/other", instance: "team-a-app",
			setup:  func(t *testing.T) { tn.publish(t, "team-a/other", configMap("x", "1")) },
			reason: "policy_project", mention: "deploys team-a/app, not this app",
			line: "deploys team-a/app, not this app: point its repoURL (or plugin parameter app) at its own app [policy_project]",
		},
		{
			name: "team A's Secret copied into team B's app, namespace renamed to generateName", app: "team-b/moved", instance: "team-b-moved",
			setup: func(t *testing.T) {
				tn.publish(t, "team-b/moved", strings.Replace(tn.secretA, "  namespace: team-a\n", "  generateName: team-a\n", 1))
				tn.application("team-b-moved", "team-b", "team-b/moved", "team-b")
			},
			reason: "policy_encrypted_document", mention: `not \"generateName\"`,
			line: `refused by tenancy policy rule "team-b": Secret db (stdin): an encrypted document's metadata may hold only`,
		},
		{
			name: "team A's Secret copied as it is into team B's app", app: "team-b/copied", instance: "team-b-copied",
			setup: func(t *testing.T) {
				tn.publish(t, "team-b/copied", tn.secretA)
				tn.application("team-b-copied", "team-b", "team-b/copied", "team-b")
			},
			reason: "policy_decryption_key", mention: "none of which the rule's decryptionKeys allow",
			line: `refused by tenancy policy rule "team-b": Secret team-a/db (stdin) is encrypted for`,
		},
		{
			name: "a Secret in team B's namespace encrypted for team A's key", app: "team-b/for-a", instance: "team-b-for-a",
			setup: func(t *testing.T) {
				tn.publish(t, "team-b/for-a", string(sopstest.EncryptSecret(t, teamSecret("team-b", "x"), tn.keyA)))
				tn.application("team-b-for-a", "team-b", "team-b/for-a", "team-b")
			},
			reason: "policy_decryption_key", mention: tn.keyA,
			line: "none of which the rule's decryptionKeys allow (\"" + tn.keyB + "\"); encrypt it for a key of this prefix (sops updatekeys after naming one in .sops.yaml), or add the key to the rule [policy_decryption_key]",
		},
		{
			name: "team A's release promoted into team B's app", app: "team-b/promoted", instance: "team-b-promoted",
			setup: func(t *testing.T) {
				head, err := tn.store.Head(t.Context(), "team-a/app")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tn.store.Copy(t.Context(), head.Ref(), "team-b/promoted", store.Publication{}); err != nil {
					t.Fatal(err)
				}
				tn.application("team-b-promoted", "team-b", "team-b/promoted", "team-b")
			},
			reason: "policy_copy", mention: "releases of team-a/app may not be copied here",
			line: `refused by tenancy policy rule "team-b": releases of team-a/app may not be copied here; the rule allows copies from its own prefix and from promoteFrom "staging/team-b": publish the release here with bucketops push, or add team-a/app's prefix to the rule's promoteFrom [policy_copy]`,
		},
		{
			name: "objects without a namespace for a destination the rule doesn't allow", app: "team-a/app", instance: "team-a-elsewhere",
			setup: func(t *testing.T) {
				tn.application("team-a-elsewhere", "team-a", "team-a/app", "kube-system")
			},
			reason: "policy_namespace", mention: `destination namespace \"kube-system\"`,
			line: `the rule allows "team-a": give it one of those namespaces, or deploy it with an Application whose destination is one [policy_namespace]`,
		},
		{
			name: "a ClusterRole", app: "team-a/cluster", instance: "team-a-cluster",
			setup: func(t *testing.T) {
				tn.publish(t, "team-a/cluster", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\n")
				tn.application("team-a-cluster", "team-a", "team-a/cluster", "team-a")
			},
			reason: "policy_cluster_scoped", mention: "cluster-scoped",
			line: `refused by tenancy policy rule "team-a": ClusterRole admin (stdin) is cluster-scoped; the rule doesn't set allowClusterScoped: take it out of the release`,
		},
		{
			name: "a Secret in clear text", app: "team-a/plain", instance: "team-a-plain",
			setup: func(t *testing.T) {
				tn.publish(t, "team-a/plain", teamSecret("team-a", "in-clear"))
				tn.application("team-a-plain", "team-a", "team-a/plain", "team-a")
			},
			reason: "policy_plaintext_secret", mention: "clear text",
			line: `refused by tenancy policy rule "team-a": Secret team-a/db (stdin) is a Secret in clear text; encrypt it with sops`,
		},
		{
			name: "an object in another team's namespace", app: "team-a/astray", instance: "team-a-astray",
			setup: func(t *testing.T) {
				tn.publish(t, "team-a/astray", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: team-b\n")
				tn.application("team-a-astray", "team-a", "team-a/astray", "team-a")
			},
			reason: "policy_namespace", mention: "team-b",
			line: `refused by tenancy policy rule "team-a": ConfigMap team-b/x (stdin) is in namespace "team-b"; the rule allows "team-a": move it to one of those, or add the namespace to the rule [policy_namespace]`,
		},
		{
			name: "an app no rule covers", app: "other/app", instance: "other",
			setup: func(t *testing.T) {
				tn.publish(t, "other/app", configMap("x", "1"))
				tn.application("other", "default", "other/app", "other")
			},
			reason: "policy_no_rule", mention: "no rule",
			line: "no rule of the tenancy policy covers this app; add a rule for its prefix to the bridge's policy file [policy_no_rule]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			// The index follows Argo CD's watch: an Application just put may
			// be looked up directly, which must give the same answer.
			r := tn.render(t, tc.app, tc.instance)
			if r.status != http.StatusForbidden || r.reason(t) != tc.reason || !strings.Contains(r.body, tc.mention) {
				t.Errorf("%d %s; want 403 %s mentioning %q", r.status, r.body, tc.reason, tc.mention)
			}
			// Admission is judged before the head is read; the rules on
			// content name the generation they judged.
			line, release := r.message(t), tc.app+" (head): "
			if head, err := tn.store.Head(t.Context(), tc.app); err == nil && !strings.HasPrefix(tc.reason, "policy_project") && tc.reason != "policy_no_rule" {
				release = head.Ref().String() + ": "
			}
			if !strings.HasPrefix(line, release) || !strings.Contains(line, tc.line) || !strings.HasSuffix(line, "["+tc.reason+"]") {
				t.Errorf("the line for Argo CD is\n\t%s\nwant it to start with %q, say %q and end with [%s]", line, release, tc.line, tc.reason)
			}
			if strings.Contains(r.body, tn.plainA) || strings.Contains(r.body, tn.plainB) {
				t.Errorf("a refused render holds a decrypted value: %s", r.body)
			}
		})
	}

	t.Run("a promotion the rule allows", func(t *testing.T) {
		v := tn.publish(t, "staging/team-b/app", configMap("settings", "staged"))
		if _, err := tn.store.Copy(t.Context(), v.Ref(), "team-b/app", store.Publication{}); err != nil {
			t.Fatal(err)
		}
		tn.application("team-b-app", "team-b", "team-b/app", "team-b")
		if r := tn.render(t, "team-b/app", "team-b-app"); r.status != 200 || !strings.Contains(r.body, "staged") {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
}

// An Application moved to another project loses the app at its next
// render, cached or not: the project is judged per request.
func TestPolicyJudgesEveryRequest(t *testing.T) {
	tn := newTenants(t, true)
	tn.publish(t, "team-a/app", configMap("settings", "a"))
	tn.application("team-a-app", "team-a", "team-a/app", "team-a")
	if r := tn.render(t, "team-a/app", "team-a-app"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	tn.argo.Update(argocdtest.Namespace, "team-a-app", func(a *v1alpha1.Application) { a.Spec.Project = "team-b" })
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := tn.render(t, "team-a/app", "team-a-app")
		if r.status == http.StatusForbidden && r.reason(t) == "policy_project" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Application moved to project team-b still gets team A's app: %d %s", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The review's reproduction of finding 7: the plugin token alone, with no
// Application named and the project and destination written by the
// caller, got team A's Secret decrypted. With Argo CD configured, only
// what Argo CD holds for a named Application is judged.
func TestThePluginTokenAloneGetsNoTeamsSecrets(t *testing.T) {
	tn := newTenants(t, true)
	tn.publish(t, "team-a/app", tn.secretA)
	tn.application("team-a-app", "team-a", "team-a/app", "team-a")
	tn.application("team-b-app", "team-b", "team-b/app", "team-b")

	for _, tc := range []struct {
		name    string
		headers map[string]string
		mention string
	}{
		{
			name:    "no Application, team A's project and namespace claimed",
			headers: map[string]string{webhook.HeaderProject: "team-a", webhook.HeaderDestination: "team-a"},
			mention: "names no Argo CD Application",
		},
		{
			name:    "team B's Application, team A's project claimed",
			headers: map[string]string{webhook.HeaderApplication: "team-b-app", webhook.HeaderProject: "team-a", webhook.HeaderDestination: "team-a"},
			mention: "deploys team-b/app, not this app",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tn.url+"/v1/apps/team-a/app/-/manifests", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+pluginToken)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			r := response{resp.StatusCode, resp.Header, string(body)}
			if r.status != http.StatusForbidden || r.reason(t) != "policy_project" || !strings.Contains(r.body, tc.mention) {
				t.Errorf("%d %s; want 403 policy_project mentioning %q", r.status, r.body, tc.mention)
			}
			if strings.Contains(r.body, tn.plainA) {
				t.Errorf("team A's password was served: %s", r.body)
			}
		})
	}

	t.Run("a claimed destination never overrides the Application's", func(t *testing.T) {
		// team A's Application deploys to team-a; objects without a
		// namespace would land there whatever the header says.
		tn.publish(t, "team-a/app", configMap("settings", "a"))
		tn.application("team-a-elsewhere", "team-a", "team-a/app", "kube-system")
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tn.url+"/v1/apps/team-a/app/-/manifests", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+pluginToken)
		req.Header.Set(webhook.HeaderApplication, "team-a-elsewhere")
		req.Header.Set(webhook.HeaderDestination, "team-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `destination namespace \"kube-system\"`) {
			t.Errorf("%d %s; want the Application's own destination judged", resp.StatusCode, body)
		}
	})
}

// The review's reproduction of finding 1, through the bridge: team A's
// Secret (no namespace, which passes every other rule) copied into team
// B's app with only its age recipient rewritten to team B's. The policy
// allows the recipient the document names; decryption must judge the key
// that opens it, and only team B's may.
func TestARewrittenRecipientGetsTeamBNothing(t *testing.T) {
	tn := newTenants(t, true)
	noNamespace := string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+tn.plainA+"\n", tn.keyA))
	tn.publish(t, "team-b/app", strings.ReplaceAll(noNamespace, tn.keyA, tn.keyB))
	tn.application("team-b-app", "team-b", "team-b/app", "team-b")
	r := tn.render(t, "team-b/app", "team-b-app")
	if r.status == http.StatusOK || strings.Contains(r.body, tn.plainA) {
		t.Fatalf("team A's Secret served to team B's Application: %d %s", r.status, r.body)
	}
	if r.status != http.StatusUnprocessableEntity || r.reason(t) != "no_key" || !strings.Contains(r.body, "not encrypted for the recipient it names") {
		t.Errorf("%d %s; want 422 no_key saying the recipient was rewritten", r.status, r.body)
	}
}
