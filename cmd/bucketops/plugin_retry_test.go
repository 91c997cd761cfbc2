package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/webhook"
)

// answers is a proxy in front of the bridge, as a load balancer would be,
// that records what the bridge answered the plugin, and can cut the first
// connections as a bridge killed mid-answer does.
type answers struct {
	mu      sync.Mutex
	reasons []string // "" for a 200, the bridge's reason otherwise, "cut", "gateway"
	cut     int      // connections still to cut
	gateway int      // answers still to give as a gateway whose backend is down
	after   func()   // called once, after the first answer
}

func (a *answers) record(reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reasons = append(a.reasons, reason)
	if a.after != nil {
		a.after()
		a.after = nil
	}
}

func (a *answers) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.reasons...)
}

// proxyBridge puts an answers proxy between the plugin and the bridge
// BUCKETOPS_BRIDGE names, and shortens the plugin's waits between tries.
func proxyBridge(t *testing.T, a *answers) {
	t.Helper()
	target, err := url.Parse(os.Getenv("BUCKETOPS_BRIDGE"))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode == http.StatusOK {
			a.record("")
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		var eb struct{ Reason string }
		if err := json.Unmarshal(body, &eb); err != nil || eb.Reason == "" {
			t.Errorf("the bridge's %d answer isn't its JSON error: %q", resp.StatusCode, body)
		}
		a.record(eb.Reason)
		return nil
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		cut, gateway := a.cut > 0, a.cut <= 0 && a.gateway > 0
		if cut {
			a.cut--
		} else if gateway {
			a.gateway--
		}
		a.mu.Unlock()
		if gateway {
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			a.record("gateway")
			return
		}
		if cut {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\napiVersion: v1\n"))
			conn.Close()
			a.record("cut")
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Setenv("BUCKETOPS_BRIDGE", hs.URL)
	saved := pluginRetryDelays
	pluginRetryDelays = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	t.Cleanup(func() { pluginRetryDelays = saved })
}

// Argo CD's repo-server stops generating a revision for an hour after three
// failed attempts (ARGOCD_PAUSE_GEN_AFTER_FAILED_ATTEMPTS), so one busy or
// restarting bridge must not fail a generation: the plugin asks again,
// and prints the release once it gets it, never the cut answer.
func TestPluginAsksAgainWhatMayPass(t *testing.T) {
	t.Run("render memory taken", func(t *testing.T) {
		budget := memory.NewBudget(memory.MinCost)
		st, _ := startAPIWith(t, func(c *webhook.Config) {
			c.Memory = budget
			c.RequestTimeout = 300 * time.Millisecond
		})
		rel := publish(t, st, "prod/api", configMap("a", "1"))
		// Another render holds all the memory until the plugin's first
		// answer (render_busy) is back.
		done, err := budget.Acquire(t.Context(), time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		a := &answers{after: done}
		proxyBridge(t, a)
		t.Setenv("PARAM_APP", "prod/api")
		r := bucketops(t, "", "plugin", "generate").must(t)
		if !strings.Contains(r.stdout, `value: "1"`) {
			t.Errorf("stdout isn't prod/api@%d: %q", rel.Generation, r.stdout)
		}
		if got := a.seen(); strings.Join(got, ",") != "render_busy," {
			t.Errorf("the bridge answered %q; want render_busy, then the release", got)
		}
	})
	t.Run("a connection cut mid-answer", func(t *testing.T) {
		a := &answers{cut: 2}
		r := generateThroughProxy(t, a).must(t)
		if strings.Count(r.stdout, "apiVersion: v1") != 1 || !strings.Contains(r.stdout, `value: "1"`) {
			t.Errorf("stdout is not the release alone: %q", r.stdout)
		}
		if got := a.seen(); strings.Join(got, ",") != "cut,cut," {
			t.Errorf("the plugin saw %q; want two cut answers, then the release", got)
		}
	})
	t.Run("a gateway whose bridge is restarting", func(t *testing.T) {
		a := &answers{gateway: 1}
		r := generateThroughProxy(t, a).must(t)
		if !strings.Contains(r.stdout, `value: "1"`) {
			t.Errorf("stdout is not the release: %q", r.stdout)
		}
		if got := a.seen(); strings.Join(got, ",") != "gateway," {
			t.Errorf("the plugin saw %q; want the gateway's 503, then the release", got)
		}
	})
	t.Run("cut every time", func(t *testing.T) {
		a := &answers{cut: 100}
		r := generateThroughProxy(t, a)
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "reading the bridge's answer") {
			t.Errorf("exit %d, stdout %q, stderr %q; want a failure naming the cut answer and nothing on stdout", r.code, r.stdout, r.stderr)
		}
		if n := len(a.seen()); n != 1+len(pluginRetryDelays) {
			t.Errorf("the plugin asked %d times; want %d", n, 1+len(pluginRetryDelays))
		}
	})
	t.Run("a refusal of the release is final", func(t *testing.T) {
		st, bucket := startAPIOn(t)
		good := publish(t, st, "prod/api", configMap("a", "1"))
		bucket.Put(t, "prod/corrupt/manifests.yaml", []byte(configMap("a", "evil")), map[string]string{"bucketops-digest": good.Digest})
		a := &answers{}
		proxyBridge(t, a)
		for app, reason := range map[string]string{"prod/corrupt": "digest_mismatch", "prod/nope": "app_not_found"} {
			t.Setenv("PARAM_APP", app)
			if r := bucketops(t, "", "plugin", "generate"); r.code == 0 || !strings.Contains(r.stderr, reason) {
				t.Errorf("%s: exit %d, stderr %q; want %s", app, r.code, r.stderr, reason)
			}
		}
		if got := a.seen(); len(got) != 2 {
			t.Errorf("the bridge answered %q; want each refusal asked once", got)
		}
	})
}

// generateThroughProxy runs the plugin for a published prod/api behind a
// proxy that first cuts a.cut connections, then answers a.gateway times as
// a gateway whose backend is down, then passes the bridge's answers on.
func generateThroughProxy(t *testing.T, a *answers) result {
	t.Helper()
	st := startAPI(t)
	publish(t, st, "prod/api", configMap("a", "1"))
	proxyBridge(t, a)
	t.Setenv("PARAM_APP", "prod/api")
	return bucketops(t, "", "plugin", "generate")
}
