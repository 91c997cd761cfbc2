package gitview_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store/storetest"
)

// Item 8 of the security review: the view kept the commits of the last
// 1,000 apps asked for, however long their histories, so a reader could
// make it hold 1,000 apps' worth of any size. It keeps CacheBytes' worth,
// the least recently asked for evicted first, and an evicted app comes
// back with the same SHAs.
func TestViewKeepsItsCommitsWithinItsBudget(t *testing.T) {
	const budget = 40 << 10 // a few apps of 3 releases (about 6 KiB each)
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	v, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler), CacheBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	r := &repo{store: st, view: v}
	var apps []string
	shas := map[string]string{}
	gens := map[string]int64{}
	for a := range 12 {
		app := fmt.Sprintf("prod/app%02d", a)
		apps = append(apps, app)
		for n := 1; n <= 3; n++ {
			gens[app] = r.publish(t, app, n, "ci@example.com", "build").Generation
		}
	}
	for i, app := range apps {
		sha, err := v.Commit(t.Context(), app, gens[app])
		if err != nil {
			t.Fatal(err)
		}
		shas[app] = sha
		if b := v.CachedBytes(); b > budget || b <= 0 {
			t.Fatalf("after %d apps, the view keeps %d bytes, want some, at most %d", i+1, b, budget)
		}
	}
	for _, tc := range []struct {
		name     string
		app      string
		requests int64
	}{
		{"the app asked for last is still in memory: no request", apps[11], 0},
		{"the app asked for first was evicted: its head and a listing, and the same SHA", apps[0], 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tb.Requests.Load()
			sha, err := v.Commit(t.Context(), tc.app, gens[tc.app])
			if err != nil || sha != shas[tc.app] {
				t.Fatalf("%s: %s %v, want %s", tc.app, sha, err, shas[tc.app])
			}
			if n := tb.Requests.Load() - before; n != tc.requests {
				t.Errorf("%s's commit cost %d requests, want %d", tc.app, n, tc.requests)
			}
		})
	}
}
