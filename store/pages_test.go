package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// fleet publishes releases[i] releases to each app i of apps, and returns
// their generations newest first, by app.
func fleet(t *testing.T, s *store.Store, apps []string, releases func(i int) int) map[string][]int64 {
	t.Helper()
	gens := map[string][]int64{}
	for i, app := range apps {
		for n := 1; n <= releases(i); n++ {
			res, err := s.Publish(t.Context(), app, pub(app, n))
			if err != nil {
				t.Fatal(err)
			}
			gens[app] = append([]int64{res.Generation}, gens[app]...)
		}
	}
	return gens
}

func TestListPages(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "fleet")
	var apps []string
	for i := range 25 {
		apps = append(apps, fmt.Sprintf("prod/app%02d", i))
	}
	apps = append(apps, "dev/a", "dev/a-b") // object order: dev/a-b/… before dev/a/…
	fleet(t, s, apps, func(int) int { return 1 })
	tb.Put(t, "fleet/prod/notes.txt", []byte("not an app"), nil)
	all, err := s.List(t.Context(), "")
	if err != nil || len(all) != len(apps) {
		t.Fatalf("List: %d apps, %v", len(all), err)
	}
	for _, tc := range []struct {
		name   string
		prefix string
		limit  int
		pages  int
	}{
		{"pages of 10 cover every app once, in List's order", "", 10, 3},
		{"pages under a prefix cover its apps", "prod", 10, 3},
		{"one page as large as the fleet", "", 100, 1},
		{"a limit of 0 is one page of everything", "", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := s.List(t.Context(), tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			var got []store.Release
			from, pages := "", 0
			for {
				before := tb.Requests.Load()
				page, next, err := s.ListPage(t.Context(), tc.prefix, store.ListOptions{From: from, Limit: tc.limit})
				if err != nil {
					t.Fatal(err)
				}
				if n := tb.Requests.Load() - before; n != 1 {
					t.Errorf("page %d cost %d requests, want 1", pages+1, n)
				}
				if tc.limit > 0 && len(page) > tc.limit {
					t.Errorf("page %d holds %d apps, limit %d", pages+1, len(page), tc.limit)
				}
				got = append(got, page...)
				pages++
				if next == "" {
					break
				}
				from = next
			}
			if pages != tc.pages || !slices.EqualFunc(got, want, func(a, b store.Release) bool { return a.App == b.App && a.Generation == b.Generation }) {
				t.Errorf("%d pages gave %d apps, want %d pages of List's %d", pages, len(got), tc.pages, len(want))
			}
		})
	}
	if _, _, err := s.ListPage(t.Context(), "", store.ListOptions{From: "../x"}); err == nil || !strings.Contains(err.Error(), "invalid app") {
		t.Errorf("a page from an invalid app: %v", err)
	}
}

func TestHistoriesOfManyAppsInOneListing(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	var apps []string
	for i := range 30 {
		apps = append(apps, fmt.Sprintf("prod/app%02d", i))
	}
	gens := fleet(t, s, apps, func(i int) int { return 1 + i%4 })
	// A retired app is a tombstone at its head; a deleted head leaves its
	// history noncurrent.
	if _, err := s.Retire(t.Context(), "prod/app03", pub("prod/app03", 9)); err != nil {
		t.Fatal(err)
	}
	head, _ := s.Head(t.Context(), "prod/app03")
	gens["prod/app03"] = append([]int64{head.Generation}, gens["prod/app03"]...)
	if err := tb.Client.Bucket(storetest.BucketName).Object("prod/app05/manifests.yaml").Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		opts       store.HistoriesOptions
		first, end int // apps[first:end]
	}{
		{"every app's whole history", store.HistoriesOptions{}, 0, 30},
		{"a run of apps from one until another", store.HistoriesOptions{From: apps[10], Until: apps[20]}, 10, 20},
		{"from an app to the last", store.HistoriesOptions{From: apps[25]}, 25, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tb.Requests.Load()
			var seen []string
			err := s.Histories(t.Context(), "prod", tc.opts, func(app string, rels []store.Release) bool {
				seen = append(seen, app)
				var got []int64
				for _, r := range rels {
					got = append(got, r.Generation)
					if r.App != app {
						t.Errorf("%s's history holds a release of %s", app, r.App)
					}
					if r.Current != (app != "prod/app05" && r.Generation == rels[0].Generation) {
						t.Errorf("%s@%d: current %v", app, r.Generation, r.Current)
					}
				}
				if !slices.Equal(got, gens[app]) {
					t.Errorf("%s: generations %v, want %v (newest first)", app, got, gens[app])
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			// The emulator answers a listing in one page; GCS in pages of 1,000.
			if n := tb.Requests.Load() - before; n != 1 {
				t.Errorf("the histories of %d apps cost %d requests, want 1 listing", len(seen), n)
			}
			if !slices.Equal(seen, apps[tc.first:tc.end]) {
				t.Errorf("apps %v, want %v", seen, apps[tc.first:tc.end])
			}
		})
	}
	t.Run("fn returning false stops the scan", func(t *testing.T) {
		n := 0
		if err := s.Histories(t.Context(), "", store.HistoriesOptions{}, func(string, []store.Release) bool { n++; return n < 3 }); err != nil || n != 3 {
			t.Errorf("%d apps seen, %v; want 3", n, err)
		}
	})
}
