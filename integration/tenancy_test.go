//go:build e2e

package integration

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"filippo.io/age"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/store"
)

// TestTenancy runs two teams on one bucket and one bridge under a tenancy
// policy (docs/tenancy.md), against the real Argo CD: each team's
// Applications live in its own AppProject and namespace, and its Secrets
// are encrypted for its own age key, all of which the bridge holds.
func TestTenancy(t *testing.T) {
	teams := map[string]*age.X25519Identity{}
	for _, team := range []string{"team-a", "team-b"} {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		teams[team] = id
		for _, o := range []struct{ path, body string }{
			{"/api/v1/namespaces/" + team, fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, team)},
			{"/apis/argoproj.io/v1alpha1/namespaces/argocd/appprojects/" + team, fmt.Sprintf(`{"apiVersion":"argoproj.io/v1alpha1","kind":"AppProject","metadata":{"name":%q,"namespace":"argocd"},
			  "spec":{"sourceRepos":["*"],"destinations":[{"server":"https://kubernetes.default.svc","namespace":"*"}]}}`, team)},
		} {
			if err := st.kube.apply(o.path, []byte(o.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The bridge holds every team's key besides the stack's own; the
	// policy decides which one decrypts what. The earlier scenarios' apps
	// (prod/…) keep a rule of their own.
	keys, err := os.ReadFile(st.ageKeys)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "age-keys.txt")
	os.WriteFile(keyFile, append(keys, sopstest.KeyFile(teams["team-a"], teams["team-b"])...), 0o600)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(policyFile, fmt.Appendf(nil, `rules:
  - prefix: tenants/team-a
    projects: [team-a]
    namespaces: [team-a]
    decryptionKeys: [%s]
  - prefix: tenants/team-b
    projects: [team-b]
    namespaces: [team-b]
    decryptionKeys: [%s]
  - prefix: prod
    projects: ["*"]
    namespaces: ["*"]
    decryptionKeys: [%s]
`, teams["team-a"].Recipient(), teams["team-b"].Recipient(), recipient), 0o600)
	if err := st.restartBridge("--age-key-file", keyFile, "--policy", policyFile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.restartBridge(); err != nil {
			t.Errorf("restarting the bridge without the policy: %v", err)
		}
	})

	secretOf := func(team, password string) string {
		plain := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: credentials\n  namespace: %s\nstringData:\n  password: %s\n", team, password)
		return string(sopstest.EncryptSecret(t, plain, teams[team].Recipient().String()))
	}
	dirOf := func(files map[string]string) string {
		dir := t.TempDir()
		for name, body := range files {
			os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
		}
		return dir
	}
	secretA := secretOf("team-a", "team-a-s3cret")

	t.Run("team A's Application deploys team A's app", func(t *testing.T) {
		createApplicationIn(t, "tenant-a", "team-a", "tenants/team-a/app", "team-a", nil)
		dir := dirOf(map[string]string{"cm.yaml": configMap("team-a", "settings", "a1"), "secret.yaml": secretA})
		if out, code := push(t, "tenants/team-a/app", dir, "--policy", policyFile); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if sec, err := st.kube.secretData("team-a", "credentials"); err != nil || sec["password"] != "team-a-s3cret" {
			t.Fatalf("Secret team-a/credentials: %v %v", sec, err)
		}
	})

	t.Run("an Application of project B is refused team A's app, whatever its plugin env says", func(t *testing.T) {
		// What an Application sets reaches the plugin as ARGOCD_ENV_*: it
		// can't pose as team A's Application or project.
		createApplicationIn(t, "intruder", "team-b", "tenants/team-a/app", "team-b", map[string]string{
			"ARGOCD_APP_NAME": "tenant-a", "ARGOCD_APP_PROJECT_NAME": "team-a",
		})
		waitForCondition(t, "intruder", "team-b", "may not deploy this app")
		if d, _ := st.kube.secretData("team-b", "credentials"); d != nil {
			t.Errorf("team A's Secret reached team B: %v", d)
		}
	})

	t.Run("team A's release promoted into team B's app is refused, at push and at render", func(t *testing.T) {
		out, errOut, code := st.bucketops("", "promote", "tenants/team-a/app", "tenants/team-b/app", "--policy", policyFile)
		if code != 2 || !strings.Contains(errOut, "may not be copied here") {
			t.Fatalf("promote across teams with the policy: exit %d %s%s", code, out, errOut)
		}
		// A writer that skips the CLI's check gets it into the bucket ...
		if out, errOut, code := st.bucketops("", "promote", "tenants/team-a/app", "tenants/team-b/app"); code != 0 {
			t.Fatalf("promote without the policy: exit %d %s%s", code, out, errOut)
		}
		// ... and the bridge refuses to render it.
		createApplicationIn(t, "tenant-b", "team-b", "tenants/team-b/app", "team-b", nil)
		waitForCondition(t, "tenant-b", "releases of tenants/team-a/app may not be copied here")
		if d, _ := st.kube.secretData("team-b", "credentials"); d != nil {
			t.Errorf("team A's Secret reached team B: %v", d)
		}
	})

	t.Run("team A's Secret pasted into team B's app with its namespace key renamed is refused", func(t *testing.T) {
		// The SOPS MAC covers values, not key names: the rename keeps it
		// valid, and without a policy the Secret would be served in clear
		// into team B's namespace.
		moved := strings.Replace(secretA, "  namespace: team-a\n", "  generateName: team-a\n", 1)
		if out, errOut, code := st.bucketops("", "push", "tenants/team-b/pasted", dirOf(map[string]string{"secret.yaml": moved})); code != 0 {
			t.Fatalf("push: exit %d %s%s", code, out, errOut)
		}
		createApplicationIn(t, "tenant-b-pasted", "team-b", "tenants/team-b/pasted", "team-b", nil)
		waitForCondition(t, "tenant-b-pasted", "policy", "generateName")
		if d, _ := st.kube.secretData("team-b", "credentials"); d != nil {
			t.Errorf("team A's Secret reached team B: %v", d)
		}
	})

	t.Run("a ClusterRoleBinding and a Secret wrapped in a ConfigMap's items, published behind the CLI, never reach the cluster", func(t *testing.T) {
		// Argo CD's repo-server would apply each item as an object of its
		// own, unseen by team B's rule, which allows the ConfigMap.
		wrapper := `apiVersion: v1
kind: ConfigMap
metadata:
  name: wrapper
  namespace: team-b
items:
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata: {name: team-b-is-admin}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
    subjects: [{kind: Group, name: "system:authenticated", apiGroup: rbac.authorization.k8s.io}]
  - apiVersion: v1
    kind: Secret
    metadata: {name: planted, namespace: kube-system}
    stringData: {token: planted}
`
		// The CLI refuses it, with or without the policy ...
		if out, errOut, code := st.bucketops(wrapper, "push", "tenants/team-b/wrapped", "-"); code != 2 || !strings.Contains(errOut, "split it into separate documents") {
			t.Fatalf("push: exit %d %s%s", code, out, errOut)
		}
		// ... a writer with the bucket's credentials writes it anyway ...
		publishBehindCLI(t, "tenants/team-b/wrapped", "# Source: wrapper.yaml\n"+wrapper)
		// ... and the bridge refuses to render it.
		createApplicationIn(t, "tenant-b-wrapped", "team-b", "tenants/team-b/wrapped", "team-b", nil)
		waitForCondition(t, "tenant-b-wrapped", "invalid_release", "wrapper.yaml: document 1", "items")
		if err := st.kube.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/team-b-is-admin", nil); !isNotFound(err) {
			t.Errorf("ClusterRoleBinding team-b-is-admin: %v, want it absent", err)
		}
		if d, _ := st.kube.secretData("kube-system", "planted"); d != nil {
			t.Errorf("the wrapped Secret reached kube-system: %v", d)
		}
	})

	t.Run("a release of team A's app that puts an object in team B's namespace is refused, and team A keeps its last good release", func(t *testing.T) {
		good := headOf(t, "tenants/team-a/app")
		// Published without the CLI's policy check, as any writer of the
		// prefix can.
		dir := dirOf(map[string]string{"cm.yaml": configMap("team-b", "settings", "a2"), "secret.yaml": secretA})
		if out, code := push(t, "tenants/team-a/app", dir); code == 0 {
			t.Errorf("push --wait of a release the policy refuses: exit 0, want not deployed\n%s", out)
		}
		bad := headOf(t, "tenants/team-a/app")
		waitForCondition(t, "tenant-a", fmt.Sprintf("tenants/team-a/app@%d: refused by tenancy policy rule %q: ConfigMap team-b/settings (cm.yaml) is in namespace \"team-b\"; "+
			"the rule allows \"team-a\": move it to one of those, or add the namespace to the rule [policy_namespace]", bad.Generation, "tenants/team-a"))
		if d, _ := st.kube.configMapData("team-b", "settings"); d != nil {
			t.Errorf("the refused ConfigMap reached team B's namespace: %v", d)
		}
		if ok, detail := hasValue(t, "team-a", "a1")(); !ok {
			t.Errorf("team A's last good release is no longer live: %s", detail)
		}
		lastDeployed(t, "tenant-a", good.Commit)
	})
}

// publishBehindCLI publishes stream as app's release straight to the bucket
// through package store, as anyone with write access to it can: none of the
// CLI's checks runs.
func publishBehindCLI(t *testing.T, app, stream string) {
	t.Helper()
	client, loc := bucketBehindCLI(t)
	if _, err := store.New(client, loc, slog.New(slog.DiscardHandler)).Publish(t.Context(), app,
		store.Publication{Data: []byte(stream), Resources: 1, Author: "behind-the-cli"}); err != nil {
		t.Fatal(err)
	}
}

// bucketBehindCLI is a GCS client of the stack's bucket, as anyone with
// rights on it has, closed when the test ends, and where releases live.
func bucketBehindCLI(t *testing.T) (*storage.Client, store.Location) {
	t.Helper()
	client, err := storage.NewClient(t.Context(), option.WithEndpoint("http://"+st.env("STORAGE_EMULATOR_HOST")+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	loc, err := store.ParseLocation(st.env("BUCKETOPS_BUCKET"))
	if err != nil {
		t.Fatal(err)
	}
	return client, loc
}

// createApplicationIn makes an Application of project for app in
// namespace, with plugin env entries env.
func createApplicationIn(t *testing.T, name, project, app, namespace string, env map[string]string) {
	t.Helper()
	var envYAML strings.Builder
	if len(env) > 0 {
		envYAML.WriteString("      env:\n")
		for k, v := range env {
			fmt.Fprintf(&envYAML, "        - name: %s\n          value: %q\n", k, v)
		}
	}
	body := fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: %s
  namespace: argocd
spec:
  project: %s
  source:
    repoURL: %s
    targetRevision: main
    path: .
    plugin:
      name: bucketops
%s  destination:
    server: https://kubernetes.default.svc
    namespace: %s
`, name, project, st.gitViewURL(app), envYAML.String(), namespace)
	if err := st.kube.apply("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/"+name, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

// waitForCondition waits until Argo CD shows, in the Application's
// conditions, that manifest generation failed with a message containing
// every one of want: the plugin's one line, which carries the bridge's
// reason.
func waitForCondition(t *testing.T, name string, want ...string) {
	t.Helper()
	eventually(t, name+": ComparisonError "+strings.Join(want, " … "), 90*time.Second, func() (bool, string) {
		a, err := st.kube.application(name)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range a.Status.Conditions {
			if c.Type != "ComparisonError" {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(c.Message, w)
			}
			if all {
				t.Logf("%s: %s", name, c.Message)
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", a.Status.Conditions)
	})
}
