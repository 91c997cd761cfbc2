package webhook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

const (
	pluginToken = "plugin-token-0123456789abcdef"
	readerToken = "reader-token-0123456789abcdef"
)

type bridge struct {
	url    string
	bucket *storetest.Bucket
	store  *store.Store
}

func newBridge(t testing.TB, dec *secrets.Decrypter) *bridge {
	t.Helper()
	return serveBridge(t, storetest.New(t, true), dec)
}

// serveBridge serves a bridge, with a cache of its own, over bucket b.
func serveBridge(t testing.TB, b *storetest.Bucket, dec *secrets.Decrypter) *bridge {
	t.Helper()
	return serveBridgeWithCache(t, b, dec, 64<<20)
}

func serveBridgeWithCache(t testing.TB, b *storetest.Bucket, dec *secrets.Decrypter, cacheBytes int64) *bridge {
	t.Helper()
	return serveBridgeConfig(t, b, dec, func(c *webhook.Config) { c.CacheBytes = cacheBytes })
}

// serveBridgeConfig serves a bridge whose configuration configure changes.
func serveBridgeConfig(t testing.TB, b *storetest.Bucket, dec *secrets.Decrypter, configure func(*webhook.Config)) *bridge {
	t.Helper()
	st := b.Store(t, "")
	if dec == nil {
		var err error
		if dec, err = secrets.NewDecrypter(nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg := webhook.Config{
		Releases:   st,
		Renderer:   dec,
		Tokens:     []webhook.Token{webhook.NewToken(webhook.RolePlugin, pluginToken), webhook.NewToken(webhook.RoleReader, readerToken)},
		Logger:     slog.New(slog.DiscardHandler),
		Registry:   prometheus.NewRegistry(),
		CacheBytes: 64 << 20,
	}
	configure(&cfg)
	srv, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes())
	t.Cleanup(hs.Close)
	return &bridge{url: hs.URL, bucket: b, store: st}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (b *bridge) get(t testing.TB, path, token string) response {
	t.Helper()
	return b.request(t, http.MethodGet, path, token, nil)
}

// request sends body (nil for none) to path with token, if any.
func (b *bridge) request(t testing.TB, method, path, token string, body io.Reader) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(out)}
}

// reason is the stable reason of an error response.
func (r response) reason(t testing.TB) string {
	t.Helper()
	var eb struct{ Error, Reason string }
	if err := json.Unmarshal([]byte(r.body), &eb); err != nil || eb.Error == "" {
		t.Fatalf("not an error response (%d): %q", r.status, r.body)
	}
	return eb.Reason
}

// message is the one line an error response gives for Argo CD.
func (r response) message(t testing.TB) string {
	t.Helper()
	var eb struct{ Message string }
	if err := json.Unmarshal([]byte(r.body), &eb); err != nil || eb.Message == "" {
		t.Fatalf("no message in the error response (%d): %q", r.status, r.body)
	}
	return eb.Message
}

func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

func (b *bridge) publish(t testing.TB, app, stream string) store.Result {
	t.Helper()
	rel, err := render.AssembleStream("stdin", strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Publish(t.Context(), app, store.Publication{Data: rel.Bytes, Resources: rel.Resources()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// overwrite writes bytes behind bucketops' back, with metadata of our choosing.
func (b *bridge) overwrite(t *testing.T, app string, data []byte, digest string) {
	t.Helper()
	b.bucket.Put(t, app+"/manifests.yaml", data, map[string]string{"bucketops-digest": digest})
}

func TestAuthentication(t *testing.T) {
	b := newBridge(t, nil)
	b.publish(t, "prod/api", configMap("a", "1"))
	cases := []struct {
		name, path, token string
		status            int
	}{
		{"health needs no token", "/healthz", "", 200},
		{"readiness needs no token", "/readyz", "", 200},
		{"metrics need no token", "/metrics", "", 200},
		{"manifests without a token are refused", "/v1/apps/prod/api/-/manifests", "", 401},
		{"manifests with a wrong token are refused", "/v1/apps/prod/api/-/manifests", "plugin-token-0123456789abcdeX", 401},
		{"manifests with a reader token are forbidden", "/v1/apps/prod/api/-/manifests", readerToken, 403},
		{"manifests with the plugin token are served", "/v1/apps/prod/api/-/manifests", pluginToken, 200},
		{"history with the plugin token is forbidden", "/v1/apps/prod/api/-/releases", pluginToken, 403},
		{"history with the reader token is served", "/v1/apps/prod/api/-/releases", readerToken, 200},
		{"the app list without a token is refused", "/v1/apps", "", 401},
		{"the app list with the plugin token is forbidden", "/v1/apps", pluginToken, 403},
		{"the app list with the reader token is served", "/v1/apps", readerToken, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := b.get(t, c.path, c.token)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge")
			}
			if c.status >= 400 && strings.Contains(r.body, "apiVersion") {
				t.Errorf("a refused request got manifests: %s", r.body)
			}
		})
	}
}

func TestManifestsHeadPinnedAndCached(t *testing.T) {
	b := newBridge(t, nil)
	v1 := b.publish(t, "prod/api", configMap("a", "1"))
	v2 := b.publish(t, "prod/api", configMap("a", "2"))

	head := b.get(t, "/v1/apps/prod/api/-/manifests", pluginToken)
	if head.status != 200 || !strings.Contains(head.body, `value: "2"`) || head.header.Get("X-Bucketops-Generation") != fmt.Sprint(v2.Generation) {
		t.Fatalf("head: %d %v %q", head.status, head.header, head.body)
	}
	if ct := head.header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("content type %q", ct)
	}
	old := b.get(t, fmt.Sprintf("/v1/apps/prod/api/-/manifests?generation=%d", v1.Generation), pluginToken)
	if old.status != 200 || !strings.Contains(old.body, `value: "1"`) {
		t.Errorf("pinned generation: %d %q", old.status, old.body)
	}

	before := b.bucket.Requests.Load()
	again := b.get(t, "/v1/apps/prod/api/-/manifests", pluginToken)
	if again.body != head.body {
		t.Errorf("a cached render differs from the first")
	}
	if n := b.bucket.Requests.Load() - before; n != 1 {
		t.Errorf("a cached render of the head made %d GCS requests, want 1 (the head's attributes)", n)
	}
	metrics := b.get(t, "/metrics", "").body
	for _, want := range []string{`bucketops_render_cache_requests_total{result="hit"} 1`, `bucketops_render_cache_requests_total{result="miss"} 2`, `bucketops_renders_total{outcome="ok"} 3`, "bucketops_render_duration_seconds_bucket"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestBadRequestsFailClosed(t *testing.T) {
	b := newBridge(t, nil)
	good := b.publish(t, "prod/api", configMap("a", "1"))
	b.publish(t, "prod/corrupt", configMap("a", "1"))
	b.overwrite(t, "prod/corrupt", []byte(configMap("a", "evil")), good.Digest)
	notK8s := []byte("# Source: x.yaml\nfoo: bar\n")
	b.overwrite(t, "prod/notk8s", notK8s, store.Digest(notK8s))
	badYAML := []byte("# Source: x.yaml\napiVersion: v1\nkind: [\n")
	b.overwrite(t, "prod/badyaml", badYAML, store.Digest(badYAML))
	b.overwrite(t, "prod/empty", nil, store.Digest(nil))

	cases := []struct {
		name, path string
		status     int
		reason     string
	}{
		{"a missing app", "/v1/apps/prod/nope/-/manifests", 404, "app_not_found"},
		{"an unknown generation", "/v1/apps/prod/api/-/manifests?generation=12345", 404, "generation_not_found"},
		{"a generation that isn't a number", "/v1/apps/prod/api/-/manifests?generation=x", 400, "invalid_parameter"},
		{"bytes that don't match their digest", "/v1/apps/prod/corrupt/-/manifests", 502, "digest_mismatch"},
		{"a document that isn't a Kubernetes object", "/v1/apps/prod/notk8s/-/manifests", 422, "invalid_release"},
		{"invalid YAML", "/v1/apps/prod/badyaml/-/manifests", 422, "invalid_release"},
		{"an empty release that isn't a tombstone", "/v1/apps/prod/empty/-/manifests", 422, "invalid_release"},
		{"an app escaping with ..", "/v1/apps/prod/../api/-/manifests", 400, "invalid_app"},
		{"an app escaping with %2e%2e", "/v1/apps/prod/%2e%2e/api/-/manifests", 400, "invalid_app"},
		{"an app with an encoded slash", "/v1/apps/prod%2Fapi/-/manifests", 400, "invalid_app"},
		{"an app in capitals", "/v1/apps/Prod/api/-/manifests", 400, "invalid_app"},
		{"an unknown action", "/v1/apps/prod/api/-/delete", 404, "no_route"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := b.get(t, c.path, pluginToken)
			if r.status != c.status || r.reason(t) != c.reason {
				t.Errorf("%d %s, want %d %s: %s", r.status, r.reason(t), c.status, c.reason, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("an error answered with content type %q", ct)
			}
		})
	}
	metrics := b.get(t, "/metrics", "").body
	if !strings.Contains(metrics, `bucketops_render_errors_total{reason="digest_mismatch"} 1`) {
		t.Errorf("/metrics doesn't count the digest mismatch")
	}
}

func TestTombstoneRendersEmpty(t *testing.T) {
	b := newBridge(t, nil)
	b.publish(t, "dev/old", configMap("a", "1"))
	if _, err := b.store.Retire(t.Context(), "dev/old", store.Publication{}); err != nil {
		t.Fatal(err)
	}
	r := b.get(t, "/v1/apps/dev/old/-/manifests", pluginToken)
	if r.status != 200 || r.body != "" || r.header.Get("X-Bucketops-Kind") != "tombstone" {
		t.Errorf("tombstone: %d %q %v", r.status, r.body, r.header)
	}
}

func TestAppsAndHistory(t *testing.T) {
	b := newBridge(t, nil)
	var gens []int64
	for n := range 5 {
		gens = append(gens, b.publish(t, "prod/api", configMap("a", fmt.Sprint(n))).Generation)
	}
	b.publish(t, "dev/web", configMap("w", "1"))

	var apps struct{ Apps []store.Release }
	if err := json.Unmarshal([]byte(b.get(t, "/v1/apps", readerToken).body), &apps); err != nil {
		t.Fatal(err)
	}
	if len(apps.Apps) != 2 || apps.Apps[0].App != "dev/web" || apps.Apps[1].Generation != gens[4] {
		t.Errorf("apps: %+v", apps.Apps)
	}
	var page struct {
		Releases   []store.Release
		NextBefore int64 `json:"next_before"`
	}
	if err := json.Unmarshal([]byte(b.get(t, "/v1/apps/prod/api/-/releases?limit=3", readerToken).body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Releases) != 3 || page.Releases[0].Generation != gens[4] || page.NextBefore != gens[2] {
		t.Errorf("first page: %+v", page)
	}
	next := b.get(t, fmt.Sprintf("/v1/apps/prod/api/-/releases?limit=3&before=%d", page.NextBefore), readerToken)
	page.Releases, page.NextBefore = nil, -1
	if err := json.Unmarshal([]byte(next.body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Releases) != 2 || page.Releases[1].Generation != gens[0] || page.NextBefore != 0 {
		t.Errorf("last page: %+v", page)
	}
	if r := b.get(t, "/v1/apps/prod/api/-/releases?limit=0", readerToken); r.status != 400 {
		t.Errorf("limit=0: %d", r.status)
	}
	if r := b.get(t, "/v1/apps/prod/none/-/releases", readerToken); r.status != 404 || r.reason(t) != "app_not_found" {
		t.Errorf("history of a missing app: %d %s", r.status, r.body)
	}
}

func TestReadinessFollowsTheBucket(t *testing.T) {
	b := serveBridgeConfig(t, storetest.New(t, true), nil, func(c *webhook.Config) { c.ReadyInterval = time.Nanosecond })
	b.publish(t, "prod/api", configMap("a", "1"))
	if r := b.get(t, "/readyz", ""); r.status != 200 {
		t.Fatalf("ready: %d %s", r.status, r.body)
	}
	b.bucket.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"error":{"code":403,"message":"bridge@acme-prod.iam.gserviceaccount.com does not have storage.objects.list access to the Google Cloud Storage bucket releases"}}`)
		return true
	})
	r := b.get(t, "/readyz", "")
	if r.status != 503 || r.reason(t) != "bucket_unreachable" {
		t.Errorf("readiness with the bucket refusing: %d %s", r.status, r.body)
	}
	// Anyone may ask /readyz: it says why in one word, never with the
	// bucket's own error, which names identities and buckets.
	if strings.Contains(r.body, "iam.gserviceaccount.com") || strings.Contains(r.body, "storage.objects.list") {
		t.Errorf("an unauthenticated readiness answer quotes the bucket's error: %s", r.body)
	}
	if r := b.get(t, "/v1/apps/prod/api/-/manifests", pluginToken); r.status != 503 || r.reason(t) != "bucket_access_denied" {
		t.Errorf("a render the bucket refuses: %d %s; want 503 bucket_access_denied", r.status, r.body)
	}
	b.bucket.Intercept(nil)
	if r := b.get(t, "/readyz", ""); r.status != 200 {
		t.Errorf("readiness after recovery: %d %s", r.status, r.body)
	}
}

// An open endpoint must not let anyone make the bridge list the bucket at
// will: one check answers every probe for ReadyInterval.
func TestReadinessListsTheBucketOncePerInterval(t *testing.T) {
	bucket := storetest.New(t, true)
	b := serveBridgeConfig(t, bucket, nil, func(c *webhook.Config) { c.ReadyInterval = time.Hour })
	before := bucket.Requests.Load()
	for range 50 {
		if r := b.get(t, "/readyz", ""); r.status != 200 {
			t.Fatalf("ready: %d %s", r.status, r.body)
		}
	}
	if n := bucket.Requests.Load() - before; n != 1 {
		t.Errorf("50 readiness probes made %d bucket requests, want 1", n)
	}
}
