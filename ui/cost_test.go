package ui_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

// fleetSite is the pages over a bucket of apps, each with a few releases.
type fleetSite struct {
	bucket *storetest.Bucket
	store  *store.Store
	ui     *ui.UI
	url    string
	client *http.Client
	apps   []string
	last   time.Time // the newest release's time
}

func newFleetSite(t *testing.T, apps, releases int, historyBytes int64) *fleetSite {
	t.Helper()
	tb := storetest.New(t, true)
	s := &fleetSite{bucket: tb, store: tb.Store(t, "")}
	for a := range apps {
		app := fmt.Sprintf("prod/app%03d", a)
		s.apps = append(s.apps, app)
		for n := 1; n <= releases; n++ {
			rel, err := render.AssembleStream("r.yaml", strings.NewReader(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: n\ndata:\n  n: %q\n", fmt.Sprint(n))))
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.store.Publish(t.Context(), app, store.Publication{Data: rel.Bytes, Resources: 1, Sequence: uint64(n), Author: "ci-bot", Message: fmt.Sprintf("build %d", n)})
			if err != nil {
				t.Fatal(err)
			}
			s.last = res.Time
		}
	}
	u, err := ui.New(ui.Config{
		Releases: s.store, Location: s.store.Location(), Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32)),
		HistoryBytes: historyBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	s.ui, s.url, s.client = u, srv.URL, client(t)
	resp, err := s.client.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return s
}

// get answers path and counts the bucket requests it cost.
func (s *fleetSite) get(t *testing.T, path string) (answer, int64) {
	t.Helper()
	before := s.bucket.Requests.Load()
	a := get(t, s.client, s.url+path)
	if a.status != http.StatusOK {
		t.Fatalf("%s: %d\n%s", path, a.status, pageText(a.body))
	}
	return a, s.bucket.Requests.Load() - before
}

// Item 8 of the security review: an as-of or activity page used to cost
// one request for each app's head, and a listing of its versions for each
// app not cached: 1 + 2N requests for N apps. A page now costs its heads'
// listing and one listing of the versions the cache lacks, however many
// apps it shows (the emulator answers a listing in one page; GCS in pages
// of 1,000 objects).
func TestFleetPagesCostTheSameHoweverManyApps(t *testing.T) {
	for _, apps := range []int{1, 60} {
		t.Run(fmt.Sprintf("%d apps of 3 releases each", apps), func(t *testing.T) {
			at := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			for _, tc := range []struct {
				name string
				path string
				rows string
				want int
			}{
				{"as of now", "/ui/asof?t=" + at, `class="asof-release"`, apps},
				{"the activity of the last week", "/ui/activity", "build ", 3 * apps},
			} {
				t.Run(tc.name, func(t *testing.T) {
					s := newFleetSite(t, apps, 3, 0) // a cold cache for each page
					a, cold := s.get(t, tc.path)
					if n := strings.Count(a.body, tc.rows); n != tc.want {
						t.Fatalf("the page shows %d rows, want %d", n, tc.want)
					}
					if cold > 2 {
						t.Errorf("cold, the page over %d apps cost %d requests, want 2: the apps' heads and one listing of their versions", apps, cold)
					}
					a, warm := s.get(t, tc.path)
					if n := strings.Count(a.body, tc.rows); n != tc.want {
						t.Fatalf("again, the page shows %d rows, want %d", n, tc.want)
					}
					if warm != 1 {
						t.Errorf("warm, the page over %d apps cost %d requests, want 1: the apps' heads", apps, warm)
					}
				})
			}
		})
	}
}

// The as-of page shows 100 apps at a time, each page a link to the next:
// what a page holds and costs doesn't grow with the fleet.
func TestAsOfPagesThroughTheFleet(t *testing.T) {
	s := newFleetSite(t, 130, 1, 0)
	at := url.QueryEscape(s.last.Add(time.Second).Format(time.RFC3339Nano))
	path := "/ui/asof?t=" + at
	var seen []string
	for page := 1; path != ""; page++ {
		a, cost := s.get(t, path)
		if cost > 2 {
			t.Errorf("page %d cost %d requests, want at most 2", page, cost)
		}
		n := strings.Count(a.body, `class="asof-release"`)
		if n > 100 {
			t.Errorf("page %d shows %d apps, want at most 100", page, n)
		}
		for _, app := range s.apps {
			if strings.Contains(a.body, `href="/ui/apps/`+app+`/-/releases"`) {
				seen = append(seen, app)
			}
		}
		path = ""
		if i := strings.Index(a.body, `id="asof-next" href="`); i >= 0 {
			rest := a.body[i+len(`id="asof-next" href="`):]
			path = strings.ReplaceAll(rest[:strings.Index(rest, `"`)], "&amp;", "&")
		}
		if page > 3 {
			t.Fatal("more than 3 pages for 130 apps")
		}
	}
	if len(seen) != 130 {
		t.Errorf("the pages showed %d apps, want each of 130 once", len(seen))
	}
	a := get(t, s.client, s.url+"/ui/asof?t="+at+"&from=..%2Fx")
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "invalid app") {
		t.Errorf("a page from an invalid app: %d %s", a.status, pageText(a.body))
	}
}

// Item 8 of the security review: the pages kept every app's history they
// were ever asked for. They keep HistoryBytes' worth, the least recently
// used evicted first.
func TestHistoryCacheStaysWithinItsBudget(t *testing.T) {
	const budget = 8 << 10 // a few apps' histories of 5 releases
	s := newFleetSite(t, 20, 5, budget)
	for i, app := range s.apps {
		s.get(t, "/ui/apps/"+app+"/-/releases")
		if b := s.ui.CachedBytes(); b > budget || b <= 0 {
			t.Fatalf("after %d apps' timelines, %d bytes of histories cached, want some, at most %d", i+1, b, budget)
		}
	}
	for _, tc := range []struct {
		name string
		app  string
		cost int64
	}{
		{"the app seen last is still cached: its head only", s.apps[19], 1},
		{"the app seen first was evicted: its head and a listing", s.apps[0], 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, n := s.get(t, "/ui/apps/"+tc.app+"/-/releases"); n != tc.cost {
				t.Errorf("%s's timeline cost %d requests, want %d", tc.app, n, tc.cost)
			}
		})
	}
	// The fleet pages go through the same cache.
	s.get(t, "/ui/activity")
	if b := s.ui.CachedBytes(); b > budget {
		t.Errorf("after the activity page, %d bytes cached, budget %d", b, budget)
	}
}
