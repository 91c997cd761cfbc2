package webhook_test

import (
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/appset"
	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/logtest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
	"github.com/bucketops/bucketops/webhook/pushtest"
)

const auditorToken = "auditor-token-alice-0123456789abcdef"

// auditorBridge serves a bridge with every route on (the git view, the
// generator, Pub/Sub push), an auditor token named alice, and its log
// in logs.
func auditorBridge(t *testing.T) (*bridge, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	b := serveBridgeConfig(t, storetest.New(t, true), nil, func(c *webhook.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Tokens = append(c.Tokens, webhook.NewToken(webhook.RoleGenerator, generatorToken), webhook.NewAuditorToken("alice", auditorToken))
		st := c.Releases.(*store.Store)
		view, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		c.Git = view.Handler()
		g, err := appset.New(appset.Config{Releases: st})
		if err != nil {
			t.Fatal(err)
		}
		c.Generator = g
		d, err := deploy.New(deploy.Config{Releases: st, Revisions: view, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		c.Deploys = d
		c.Push = &webhook.PushAuth{Audience: pushAudience, ServiceAccount: pushAccount, Keys: pushtest.NewIssuer(t).KeySet(time.Minute)}
	})
	b.publish(t, "prod/api", configMap("a", "1"))
	return b, logs
}

// TestAuditorTokenReachesOnlyTheReaderAPI: an auditor token reads apps,
// history and status, and is refused (403, not 401: the bridge knows it)
// the decrypted manifests, push, the generator and the git view.
func TestAuditorTokenReachesOnlyTheReaderAPI(t *testing.T) {
	b, _ := auditorBridge(t)
	cases := []struct {
		name, method, path string
		want               int
	}{
		{"the app list is served", http.MethodGet, "/v1/apps", 200},
		{"an app's history is served", http.MethodGet, "/v1/apps/prod/api/-/releases", 200},
		{"the deploy status passes authentication (no Argo CD here)", http.MethodGet, "/v1/apps/prod/api/-/status", 501},
		{"the manifests, decrypted Secrets included, are forbidden", http.MethodGet, "/v1/apps/prod/api/-/manifests", 403},
		{"Pub/Sub push is forbidden", http.MethodPost, "/v1/pubsub/push", 403},
		{"the ApplicationSet generator is forbidden", http.MethodPost, appset.Path, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := b.request(t, c.method, c.path, auditorToken, strings.NewReader(`{}`))
			if r.status != c.want {
				t.Errorf("%s %s with the auditor token: %d, want %d: %s", c.method, c.path, r.status, c.want, r.body)
			}
		})
	}
	t.Run("the git view, Argo CD's repository credential, is forbidden", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+"/git/prod/api.git/info/refs?service=git-upload-pack", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("alice", auditorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("git view with the auditor token: %d, want 403", resp.StatusCode)
		}
	})
	t.Run("the reader token still reads the git view", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+"/git/prod/api.git/info/refs?service=git-upload-pack", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("argocd", readerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("git view with the reader token: %d, want 200", resp.StatusCode)
		}
	})
}

// TestAuditorAccessLog: every request an auditor token makes, served or
// refused, is one log line with the auditor's name, the method, path and
// status; the token itself is never logged, and other tokens make no
// such line.
func TestAuditorAccessLog(t *testing.T) {
	b, logs := auditorBridge(t)
	b.get(t, "/v1/apps?prefix=prod", auditorToken)
	b.get(t, "/v1/apps/prod/api/-/manifests", auditorToken)
	b.get(t, "/v1/apps", readerToken)

	lines := logs.Lines(t, "auditor access")
	if len(lines) != 2 {
		t.Fatalf("%d access log lines, want 2 (the auditor's requests):\n%s", len(lines), logs)
	}
	for i, want := range []struct {
		path   string
		status float64
	}{{"/v1/apps", 200}, {"/v1/apps/prod/api/-/manifests", 403}} {
		l := lines[i]
		if l["auditor"] != "alice" || l["method"] != "GET" || l["path"] != want.path || l["status"] != want.status {
			t.Errorf("access log line %d: %v, want alice GET %s %v", i, l, want.path, want.status)
		}
	}
	if lines[0]["query"] != "prefix=prod" {
		t.Errorf("access log line of /v1/apps?prefix=prod has query %v", lines[0]["query"])
	}
	if strings.Contains(logs.String(), auditorToken) {
		t.Errorf("the log holds the auditor's token:\n%s", logs)
	}
}

// TestAuditorTokenFile: an auditor token is named after its file, and two
// holders of one name are refused at start.
func TestAuditorTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/alice.token"
	if err := os.WriteFile(path, []byte(auditorToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := webhook.LoadToken(webhook.RoleAuditor, path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Role != webhook.RoleAuditor || tok.Name != "alice" {
		t.Errorf("token file alice.token: role %s, name %q; want auditor alice", tok.Role, tok.Name)
	}
	if _, err := webhook.LoadToken(webhook.RoleAuditor, dir+"/.token"); err == nil || !strings.Contains(err.Error(), "named") {
		t.Errorf("a token file without a name: %v", err)
	}
	_, err = webhook.New(webhook.Config{
		Releases: storetest.New(t, true).Store(t, ""), Renderer: noRenderer{}, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Tokens: []webhook.Token{tok, webhook.NewAuditorToken("alice", "another-secret-0123456789abcdef")},
	})
	if err == nil || !strings.Contains(err.Error(), `two auditor tokens named "alice"`) {
		t.Errorf("two auditors named alice: %v", err)
	}
}

type noRenderer struct{ webhook.Renderer }
