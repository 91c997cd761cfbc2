package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

// inMemory is an app's history held in memory, through the interface the
// pages read: publishing 10,000 releases through the emulator takes
// minutes. Heads and reads still cost what the cache can't save.
type inMemory struct {
	app  string
	rels []store.Release // newest first
}

func (m *inMemory) Head(context.Context, string) (store.Release, error) { return m.rels[0], nil }
func (m *inMemory) History(context.Context, string, store.HistoryOptions) ([]store.Release, error) {
	return append([]store.Release(nil), m.rels...), nil
}
func (m *inMemory) List(context.Context, string) ([]store.Release, error) { return m.rels[:1], nil }
func (m *inMemory) ListPage(context.Context, string, store.ListOptions) ([]store.Release, string, error) {
	return m.rels[:1], "", nil
}
func (m *inMemory) Histories(_ context.Context, _ string, _ store.HistoriesOptions, fn func(string, []store.Release) bool) error {
	fn(m.app, append([]store.Release(nil), m.rels...))
	return nil
}
func (m *inMemory) Stat(context.Context, store.Ref) (store.Release, error) {
	return store.Release{}, store.ErrNotFound
}
func (m *inMemory) Read(context.Context, store.Ref) (store.Release, []byte, error) {
	return store.Release{}, nil, store.ErrNotFound
}

// serve returns a logged-in client of the pages over src.
func serve(b *testing.B, src ui.Releases) (*http.Client, string) { return serveWith(b, src, 0) }

// serveWith is serve with the pages keeping historyBytes of histories.
func serveWith(b *testing.B, src ui.Releases, historyBytes int64) (*http.Client, string) {
	u, err := ui.New(ui.Config{Releases: src, Location: store.Location{Bucket: "b"}, Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32)), HistoryBytes: historyBytes})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	b.Cleanup(srv.Close)
	c := client(b)
	resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return c, srv.URL
}

// BenchmarkTimeline is a page of the timeline of an app with 10,000
// releases, warm: the listing is cached by the head's generation, so a page
// costs the head's attributes (nothing here) and rendering 50 rows.
func BenchmarkTimeline(b *testing.B) {
	m := &inMemory{app: "prod/big"}
	for i := 10_000; i >= 1; i-- {
		m.rels = append(m.rels, store.Release{App: "prod/big", Generation: int64(1764800000000000 + i), Time: time.Unix(1764800000+int64(i), 0),
			Sequence: uint64(i), Kind: "release", Author: "ci-bot", Message: fmt.Sprintf("build %d", i), Digest: "sha256:00", Current: i == 10_000})
	}
	c, base := serve(b, m)
	for _, p := range []int{1, 100, 200} {
		b.Run(fmt.Sprintf("page=%d", p), func(b *testing.B) {
			u := fmt.Sprintf("%s/ui/apps/prod/big/-/releases?page=%d", base, p)
			if a := get(b, c, u); a.status != 200 {
				b.Fatalf("%d", a.status)
			}
			for b.Loop() {
				if a := get(b, c, u); a.status != 200 {
					b.Fatalf("%d", a.status)
				}
			}
		})
	}
}

// BenchmarkFleetPages is the as-of page (100 apps to a page) and the
// activity page of a week over fleets of 100 and 1,000 apps with 10
// releases each, through the real GCS client to the emulator, cold (the
// pages keep no history) and warm (the histories cached). requests/op is
// what a page costs the bucket: it used to be one request per app for its
// head and, cold, one listing per app of its versions.
func BenchmarkFleetPages(b *testing.B) {
	const releases = 10
	for _, apps := range []int{100, 1000} {
		tb := storetest.New(b, true)
		st := tb.Store(b, "")
		// Written directly into the emulator: 10,000 publishes would
		// take minutes, and the point is what reading them costs.
		now := time.Now()
		gen := now.UnixMicro()
		for a := range apps {
			name := fmt.Sprintf("prod/app%04d/manifests.yaml", a)
			for n := 1; n <= releases; n++ {
				data := fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  n: %q\n", fmt.Sprint(n))
				gen++
				tb.Server.CreateObject(fakestorage.Object{
					ObjectAttrs: fakestorage.ObjectAttrs{
						BucketName: storetest.BucketName, Name: name, Generation: gen, ContentType: store.ContentType,
						Created: now.Add(-time.Duration(releases-n) * time.Hour),
						Metadata: map[string]string{"bucketops-digest": store.Digest(data), "bucketops-sequence": fmt.Sprint(n),
							"bucketops-author": "ci-bot", "bucketops-message": fmt.Sprintf("build %d", n)},
					},
					Content: data,
				})
			}
		}
		at := url.QueryEscape(now.Add(-90 * time.Minute).UTC().Format(time.RFC3339))
		for _, cache := range []struct {
			name  string
			bytes int64
		}{{"cold", -1}, {"warm", 0}} {
			c, base := serveWith(b, st, cache.bytes)
			for _, p := range []struct{ name, path, row string }{
				{"asof", "/ui/asof?t=" + at, `class="asof-release"`},
				{"activity", "/ui/activity", "build "},
			} {
				b.Run(fmt.Sprintf("apps=%d/page=%s/%s", apps, p.name, cache.name), func(b *testing.B) {
					u := base + p.path
					if a := get(b, c, u); a.status != 200 || strings.Count(a.body, p.row) != min(apps, 100) && p.name == "asof" {
						b.Fatalf("%d %s", a.status, pageText(a.body))
					}
					before := tb.Requests.Load()
					for b.Loop() {
						if a := get(b, c, u); a.status != 200 {
							b.Fatalf("%d", a.status)
						}
					}
					b.ReportMetric(float64(tb.Requests.Load()-before)/float64(b.N), "requests/op")
				})
			}
		}
	}
}

// BenchmarkDiff is the diff page of two releases of 200 objects, 20 of them
// SOPS-encrypted Secrets, that differ in a tenth of their ConfigMaps and
// every Secret, read from the emulator: reads with digest checks, parsing,
// redaction and 40 unified diffs.
func BenchmarkDiff(b *testing.B) {
	tb := storetest.New(b, true)
	st := tb.Store(b, "")
	keys := sopstest.NewAgeKeys(b, 1)
	var gens []int64
	for v := range 2 {
		var s strings.Builder
		for i := range 200 {
			if i > 0 {
				s.WriteString("---\n")
			}
			if i%10 == 0 {
				s.Write(sopstest.EncryptSecret(b, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s%d\n  namespace: pay\nstringData:\n  password: pw-%d-%d\n", i, i, v), keys[0].Recipient().String()))
				continue
			}
			value := "same"
			if i%10 == 5 {
				value = fmt.Sprint(v)
			}
			fmt.Fprintf(&s, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\n  namespace: pay\ndata:\n  value: %q\n  other: %q\n", i, value, strings.Repeat("x", 100))
		}
		rel, err := render.AssembleStream("r.yaml", strings.NewReader(s.String()))
		if err != nil {
			b.Fatal(err)
		}
		res, err := st.Publish(context.Background(), "prod/big", store.Publication{Data: rel.Bytes, Resources: rel.Resources()})
		if err != nil {
			b.Fatal(err)
		}
		gens = append(gens, res.Generation)
	}
	c, base := serve(b, st)
	u := fmt.Sprintf("%s/ui/apps/prod/big/-/diff?from=%d&to=%d", base, gens[0], gens[1])
	if a := get(b, c, u); a.status != 200 || !strings.Contains(a.body, "0 added, 0 removed, 40 changed, 160 unchanged") {
		b.Fatalf("%d %s", a.status, pageText(a.body))
	}
	for b.Loop() {
		get(b, c, u)
	}
}

// countingArgo counts the unary calls the bridge makes to Argo CD.
type countingArgo struct {
	application.ApplicationServiceClient
	calls *atomic.Int64
}

func (c countingArgo) Get(ctx context.Context, q *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.Application, error) {
	c.calls.Add(1)
	return c.ApplicationServiceClient.Get(ctx, q, opts...)
}

func (c countingArgo) List(ctx context.Context, q *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationList, error) {
	c.calls.Add(1)
	return c.ApplicationServiceClient.List(ctx, q, opts...)
}

func (c countingArgo) Sync(ctx context.Context, q *application.ApplicationSyncRequest, opts ...grpc.CallOption) (*v1alpha1.Application, error) {
	c.calls.Add(1)
	return c.ApplicationServiceClient.Sync(ctx, q, opts...)
}

// BenchmarkTimelineDeploys is BenchmarkTimeline with the deploy column: an
// app of 10,000 releases deployed by 3 Applications, each with a full
// history of 10 deploys, read by the bridge's real deployer from a fake
// Argo CD (through Argo CD's client and watch) and named as releases by
// the real git view. Cold, the pages keep no history (every page lists the
// app's releases); warm, it is cached. The git view is warm in both, as on
// a bridge Argo CD fetches from. argocd-requests/op counts the bridge's
// calls to Argo CD per page: the record comes from the watched index.
func BenchmarkTimelineDeploys(b *testing.B) {
	const app = "prod/big"
	m := &inMemory{app: app}
	for i := 10_000; i >= 1; i-- {
		m.rels = append(m.rels, store.Release{App: app, Generation: int64(1764800000000000 + i), Time: time.Unix(1764800000+int64(i), 0),
			Sequence: uint64(i), Kind: "release", Author: "ci-bot", Message: fmt.Sprintf("build %d", i), Digest: "sha256:00", Current: i == 10_000})
	}
	view, err := gitview.New(gitview.Config{Source: m, Location: store.Location{Bucket: "b"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	argo := argocdtest.New(b)
	for n, name := range []string{"big-prod", "big-staging", "big-canary"} {
		a := argocdtest.PluginApp(name, "", app)
		a.Spec.Source.RepoURL, a.Spec.Source.TargetRevision = "https://bridge.example.com/git/"+app+".git", "main"
		// The newest releases, the first Application a step behind the others.
		for i := range 10 {
			rel := m.rels[20-2*i+n]
			sha, err := view.Commit(b.Context(), app, rel.Generation)
			if err != nil {
				b.Fatal(err)
			}
			argocdtest.Deployed(a, sha, rel.Time.Add(time.Second), rel.Time.Add(time.Minute))
		}
		argo.Put(a)
	}
	var calls atomic.Int64
	d, err := deploy.New(deploy.Config{
		Releases: m, Revisions: view, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Connect: func() (application.ApplicationServiceClient, io.Closer, error) {
			return countingArgo{argo.Client(b), &calls}, io.NopCloser(nil), nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ds, err := d.Deploys(b.Context(), app); err == nil && len(ds.Applications) == 3 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the deployer never loaded the Applications")
		}
	}
	for _, cache := range []struct {
		name  string
		bytes int64
	}{{"cold", -1}, {"warm", 0}} {
		u, err := ui.New(ui.Config{Releases: m, Deploys: d, Location: store.Location{Bucket: "b"}, Logger: slog.New(slog.DiscardHandler),
			Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32)), HistoryBytes: cache.bytes})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(u.Handler())
		b.Cleanup(srv.Close)
		c := client(b)
		resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}})
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		for _, p := range []int{1, 200} {
			b.Run(fmt.Sprintf("page=%d/%s", p, cache.name), func(b *testing.B) {
				u := fmt.Sprintf("%s/ui/apps/%s/-/releases?page=%d", srv.URL, app, p)
				want := map[int]string{1: "live on big-prod", 200: "older than what Argo CD keeps"}[p]
				if a := get(b, c, u); a.status != 200 || !strings.Contains(a.body, want) {
					b.Fatalf("%d, want %q: %s", a.status, want, pageText(a.body))
				}
				before := calls.Load()
				for b.Loop() {
					if a := get(b, c, u); a.status != 200 {
						b.Fatalf("%d", a.status)
					}
				}
				b.ReportMetric(float64(calls.Load()-before)/float64(b.N), "argocd-requests/op")
			})
		}
	}
}
