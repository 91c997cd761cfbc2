package main

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

const testPluginToken = "plugin-token-0123456789abcdef"

// startAPI serves the bridge's API over a fresh bucket and points the plugin
// at it the way the argocd-repo-server sidecar does: environment variables,
// a token file, a working directory of its own.
func startAPI(t *testing.T) *store.Store {
	t.Helper()
	st, _ := startAPIOn(t)
	return st
}

func startAPIOn(t *testing.T) (*store.Store, *storetest.Bucket) {
	t.Helper()
	return startAPIWith(t, func(*webhook.Config) {})
}

// startAPIWith is startAPIOn with the bridge's configuration amended.
func startAPIWith(t *testing.T, amend func(*webhook.Config)) (*store.Store, *storetest.Bucket) {
	t.Helper()
	b := storetest.New(t, true)
	st := b.Store(t, "")
	dec, err := secrets.NewDecrypter(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhook.Config{
		Releases: st, Renderer: dec, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Tokens: []webhook.Token{webhook.NewToken(webhook.RolePlugin, testPluginToken)}, CacheBytes: 1 << 20,
	}
	amend(&cfg)
	srv, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes())
	t.Cleanup(hs.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testPluginToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUCKETOPS_BRIDGE", hs.URL)
	t.Setenv("BUCKETOPS_TOKEN_FILE", tokenFile)
	t.Setenv("PARAM_APP", "")
	t.Setenv("PARAM_GENERATION", "")
	t.Setenv("ARGOCD_ENV_BUCKETOPS_APP", "")
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv("TMPDIR", t.TempDir())
	t.Cleanup(func() {
		for _, dir := range []string{work, os.Getenv("TMPDIR")} {
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the plugin left files in %s: %v", dir, entries)
			}
		}
	})
	return st, b
}

func publish(t *testing.T, st *store.Store, app, stream string) store.Result {
	t.Helper()
	rel, err := render.AssembleStream("stdin", strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Publish(t.Context(), app, store.Publication{Data: rel.Bytes, Resources: rel.Resources()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPluginGeneratePrintsTheRelease(t *testing.T) {
	st := startAPI(t)
	v1 := publish(t, st, "prod/api", configMap("a", "1"))
	publish(t, st, "prod/api", configMap("a", "2"))

	t.Setenv("PARAM_APP", "prod/api")
	out := bucketops(t, "", "plugin", "generate").must(t)
	if want := "# Source: stdin\n" + configMap("a", "2"); out.stdout != want {
		t.Errorf("generate printed:\n%s\nwant:\n%s", out.stdout, want)
	}
	t.Setenv("PARAM_GENERATION", strings.TrimPrefix(v1.Ref().String(), "prod/api@"))
	if out := bucketops(t, "", "plugin", "generate").must(t); !strings.Contains(out.stdout, `value: "1"`) {
		t.Errorf("a pinned generation printed %q", out.stdout)
	}

	// The Application's env entry is the fallback for the parameter.
	t.Setenv("PARAM_APP", "")
	t.Setenv("PARAM_GENERATION", "")
	t.Setenv("ARGOCD_ENV_BUCKETOPS_APP", "prod/api")
	if out := bucketops(t, "", "plugin", "generate").must(t); !strings.Contains(out.stdout, `value: "2"`) {
		t.Errorf("app from ARGOCD_ENV_BUCKETOPS_APP printed %q", out.stdout)
	}
}

// TestPluginGenerateEmptyEnvIsUnset: Argo CD 3.0 passes an Application's
// plugin env entry with an empty value to the plugin as an empty variable
// (ARGOCD_ENV_BUCKETOPS_APP=""), where v2.14 left it out; parameters set to
// "" arrive the same way. Empty means unset, as on v2.14.
func TestPluginGenerateEmptyEnvIsUnset(t *testing.T) {
	st := startAPI(t)
	v1 := publish(t, st, "prod/api", configMap("a", "1"))
	publish(t, st, "prod/api", configMap("a", "2"))
	for _, tc := range []struct {
		name     string
		revision bool // the git view's revision of v1 is checked out
		env      map[string]string
		want     string
		code     int
	}{
		{"an empty BUCKETOPS_APP entry leaves the checked-out revision to name the release", true,
			map[string]string{"ARGOCD_ENV_BUCKETOPS_APP": "", "PARAM_APP": "", "PARAM_GENERATION": ""}, `value: "1"`, 0},
		{"an empty generation parameter doesn't pin a second time", true,
			map[string]string{"ARGOCD_ENV_BUCKETOPS_APP": "prod/api", "PARAM_GENERATION": ""}, `value: "1"`, 0},
		{"an empty app parameter falls back to the env entry", false,
			map[string]string{"PARAM_APP": "", "ARGOCD_ENV_BUCKETOPS_APP": "prod/api", "PARAM_GENERATION": ""}, `value: "2"`, 0},
		{"an empty env entry falls back to nothing, and the plugin says what to set", false,
			map[string]string{"PARAM_APP": "", "ARGOCD_ENV_BUCKETOPS_APP": ""}, "no app: point the Application's repoURL", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if tc.revision {
				file := gitview.NewReleaseFile(st.Location(), v1.Release)
				if err := os.WriteFile(gitview.FileName, file.Encode(), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Remove(gitview.FileName) })
			}
			out := bucketops(t, "", "plugin", "generate")
			if got := out.stdout + out.stderr; out.code != tc.code || !strings.Contains(got, tc.want) {
				t.Errorf("generate: exit %d, printed %q, want exit %d and %q", out.code, got, tc.code, tc.want)
			}
		})
	}
}

func TestPluginGenerateTombstoneIsEmpty(t *testing.T) {
	st := startAPI(t)
	publish(t, st, "dev/old", configMap("a", "1"))
	if _, err := st.Retire(t.Context(), "dev/old", store.Publication{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PARAM_APP", "dev/old")
	if out := bucketops(t, "", "plugin", "generate").must(t); out.stdout != "" {
		t.Errorf("a tombstone printed %q", out.stdout)
	}
}

func TestPluginGenerateFailsClosed(t *testing.T) {
	st, bucket := startAPIOn(t)
	good := publish(t, st, "prod/api", configMap("a", "1"))
	// Objects written behind bucketops' back.
	overwrite := func(app string, data []byte, digest string) {
		bucket.Put(t, app+"/manifests.yaml", data, map[string]string{"bucketops-digest": digest})
	}
	overwrite("prod/corrupt", []byte(configMap("a", "evil")), good.Digest)
	notK8s := []byte("# Source: x.yaml\nfoo: bar\n")
	overwrite("prod/notk8s", notK8s, store.Digest(notK8s))
	badYAML := []byte("# Source: x.yaml\napiVersion: v1\nkind: [\n")
	overwrite("prod/badyaml", badYAML, store.Digest(badYAML))
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no app", map[string]string{}, []string{"no app", "parameter app"}},
		{"a missing app", map[string]string{"PARAM_APP": "prod/nope"}, []string{"bucketops: prod/nope (head): no release of prod/nope in the bucket; publish one (bucketops push prod/nope DIR)", "[app_not_found]"}},
		{"an unknown generation", map[string]string{"PARAM_APP": "prod/api", "PARAM_GENERATION": "42"}, []string{"bucketops: prod/api@42: no generation 42 of prod/api in the bucket", "bucketops log prod/api", "[generation_not_found]"}},
		{"an app that escapes", map[string]string{"PARAM_APP": "../etc"}, []string{`"../etc"`}},
		{"bytes that don't match their digest", map[string]string{"PARAM_APP": "prod/corrupt"}, []string{"bucketops: prod/corrupt@", "the stored bytes don't match the release's bucketops-digest", "bucketops rollback prod/corrupt --to GEN", "[digest_mismatch]"}},
		{"a document that isn't a Kubernetes object", map[string]string{"PARAM_APP": "prod/notk8s"}, []string{"bucketops: prod/notk8s@", "x.yaml: document 1", "fix the manifests and publish again", "[invalid_release]"}},
		{"invalid YAML", map[string]string{"PARAM_APP": "prod/badyaml"}, []string{"bucketops: prod/badyaml@", "[invalid_release]", "x.yaml"}},
		{"a wrong token", map[string]string{"PARAM_APP": "prod/api", "BUCKETOPS_TOKEN_FILE": writeToken(t, "wrong-token-0123456789abcdef")}, []string{"unauthenticated", "401"}},
		{"a missing token file", map[string]string{"PARAM_APP": "prod/api", "BUCKETOPS_TOKEN_FILE": "/nonexistent/token"}, []string{"bearer token", "/nonexistent/token"}},
		{"an unreachable bridge", map[string]string{"PARAM_APP": "prod/api", "BUCKETOPS_BRIDGE": "http://127.0.0.1:1"}, []string{"prod/api (head)", "bridge unreachable"}},
		{"no bridge configured", map[string]string{"PARAM_APP": "prod/api", "BUCKETOPS_BRIDGE": ""}, []string{"BUCKETOPS_BRIDGE"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			r := bucketops(t, "", "plugin", "generate")
			if r.code == 0 || r.stdout != "" {
				t.Errorf("exit %d with stdout %q; want a failure and nothing on stdout", r.code, r.stdout)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("stderr is not one line: %q", r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr doesn't say %q: %s", w, r.stderr)
				}
			}
		})
	}
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
