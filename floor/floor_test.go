package floor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

func newFloors(t *testing.T, prefix string) (*floor.Floors, *storetest.Bucket) {
	t.Helper()
	b := storetest.New(t, true)
	return floor.New(b.Client, store.Location{Bucket: storetest.BucketName, Prefix: prefix}), b
}

func mark(gen int64) floor.Mark {
	return floor.Mark{App: "prod/web", Generation: gen, Digest: digestOf(gen)}
}

func digestOf(gen int64) string { return "sha256:" + strings.Repeat(string(rune('a'+gen%6)), 64) }

func TestAFloorOnlyRises(t *testing.T) {
	f, _ := newFloors(t, "")
	ctx := t.Context()
	if m, err := f.Get(ctx, "prod/web"); err != nil || m.Generation != 0 {
		t.Fatalf("an app with no floor: %+v %v", m, err)
	}
	for _, c := range []struct{ raise, want int64 }{{5, 5}, {3, 5}, {9, 9}, {9, 9}, {1, 9}} {
		got, err := f.Raise(ctx, mark(c.raise))
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != c.want {
			t.Errorf("raise to %d: the floor is %d, want %d", c.raise, got.Generation, c.want)
		}
		if m, _ := f.Get(ctx, "prod/web"); m.Generation != c.want {
			t.Errorf("after raising to %d, Get says %d, want %d", c.raise, m.Generation, c.want)
		}
	}
}

func TestConcurrentRaisersConvergeOnTheHighest(t *testing.T) {
	f, _ := newFloors(t, "team")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := f.Raise(t.Context(), mark(int64(10+i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m, err := f.Get(t.Context(), "prod/web"); err != nil || m.Generation != 17 {
		t.Errorf("after 8 racing raisers the floor is %d (%v), want 17", m.Generation, err)
	}
}

func TestADeletedFloorIsRestoredFromItsVersions(t *testing.T) {
	f, b := newFloors(t, "")
	ctx := t.Context()
	f.Raise(ctx, mark(5))
	f.Raise(ctx, mark(7))
	name := f.ObjectName("prod/web")
	if err := b.Client.Bucket(storetest.BucketName).Object(name).Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := f.Get(ctx, "prod/web"); err != nil || m.Generation != 7 {
		t.Fatalf("a deleted floor reads as %d (%v), want 7 from its newest version", m.Generation, err)
	}
	// Raising to an older release writes the deleted floor back, unchanged.
	if m, err := f.Raise(ctx, mark(6)); err != nil || m.Generation != 7 {
		t.Fatalf("raise to 6 over a deleted floor of 7: %d %v", m.Generation, err)
	}
	if attrs := b.Attrs(t, name, 0); attrs == nil {
		t.Fatal("the floor object was not written back")
	}
	// Serving the floor's own release writes a deleted floor back too.
	if err := b.Client.Bucket(storetest.BucketName).Object(name).Delete(ctx); err != nil {
		t.Fatal(err)
	}
	at7 := floor.Claim{Generation: 7, Digest: digestOf(7), Replaced: 6}
	if err := f.Admit(ctx, "prod/web", at7, nil); err != nil {
		t.Fatal(err)
	}
	if attrs := b.Attrs(t, name, 0); attrs == nil {
		t.Fatal("serving the floor's release did not write the deleted floor back")
	}
	// A refused release is refused whether or not the floor object is live.
	err := f.Admit(ctx, "prod/web", floor.Claim{Generation: 3, Replaced: 2}, func(context.Context) (floor.Claim, error) {
		return floor.Claim{Generation: 3, Replaced: 2}, nil
	})
	if !errors.Is(err, floor.ErrRollback) {
		t.Errorf("a head below a restored floor: %v, want a rollback refusal", err)
	}
}

func TestAdmit(t *testing.T) {
	f, _ := newFloors(t, "")
	ctx := t.Context()
	head := func(c floor.Claim) func(context.Context) (floor.Claim, error) {
		return func(context.Context) (floor.Claim, error) { return c, nil }
	}
	at := func(gen, replaced int64) floor.Claim {
		return floor.Claim{Generation: gen, Digest: digestOf(gen), Replaced: replaced}
	}
	// The first release accepted sets the floor; each newer one raises it.
	for _, c := range []floor.Claim{at(10, 0), at(20, 10), at(30, 20)} {
		if err := f.Admit(ctx, "prod/web", c, head(c)); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	if m, _ := f.Get(ctx, "prod/web"); m.Generation != 30 {
		t.Fatalf("floor %d after accepting 30", m.Generation)
	}
	cases := []struct {
		name   string
		served floor.Claim
		head   floor.Claim
		ok     bool
	}{
		{"the floor's own release", at(30, 20), at(30, 20), true},
		{"a pinned older release while the head is intact", at(20, 10), at(30, 20), true},
		{"a pinned older release while a newer head descends", at(10, 0), at(40, 30), true},
		{"the tail deleted: the head is older than the floor", at(20, 10), at(20, 10), false},
		{"an older release copied back as a new head", at(50, 10), at(50, 10), false},
		{"the floor's release copied back", at(50, 20), at(50, 20), false},
		{"another digest at the floor's generation", floor.Claim{Generation: 30, Digest: digestOf(31), Replaced: 20}, floor.Claim{Generation: 30, Digest: digestOf(31), Replaced: 20}, false},
		{"a pinned older release under a copied-back head", at(20, 10), at(50, 10), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := f.Admit(ctx, "prod/web", c.served, head(c.head))
			if c.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !c.ok {
				if !errors.Is(err, floor.ErrRollback) || !strings.Contains(err.Error(), "prod/web@30") || !strings.Contains(err.Error(), "docs/signing.md") {
					t.Errorf("got %v, want a rollback refusal naming the floor and how to recover", err)
				}
			}
		})
	}
	if m, _ := f.Get(ctx, "prod/web"); m.Generation != 30 {
		t.Errorf("refused and pinned requests moved the floor to %d", m.Generation)
	}
	// A newer signed release raises it again.
	if err := f.Admit(ctx, "prod/web", at(40, 30), head(at(40, 30))); err != nil {
		t.Fatal(err)
	}
	if m, _ := f.Get(ctx, "prod/web"); m.Generation != 40 {
		t.Errorf("floor %d after accepting 40", m.Generation)
	}
}

func TestAFloorThatCantBeReadFailsClosed(t *testing.T) {
	f := floor.New(storetest.New(t, true).Client, store.Location{Bucket: "no-such-bucket"})
	err := f.Admit(t.Context(), "prod/web", floor.Claim{Generation: 1}, nil)
	if !errors.Is(err, floor.ErrUnavailable) || !strings.Contains(err.Error(), floor.Dir) {
		t.Errorf("got %v, want ErrUnavailable naming %s", err, floor.Dir)
	}
}

// Floors live in the bucket beside the releases: no listing of apps (the
// API's, the UI's, the ApplicationSet generator's and the git view's all
// list through the store) may take one for an app.
func TestFloorsAreNotApps(t *testing.T) {
	for _, prefix := range []string{"", "team"} {
		b := storetest.New(t, true)
		st := b.Store(t, prefix)
		f := floor.New(b.Client, store.Location{Bucket: storetest.BucketName, Prefix: prefix})
		ctx := t.Context()
		// An app whose last segment is the release object's name is the
		// one whose floor could look like a release object.
		for _, app := range []string{"prod/web", "prod/manifests.yaml"} {
			res, err := st.Publish(ctx, app, store.Publication{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"), Resources: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Raise(ctx, floor.Mark{App: app, Generation: res.Generation, Digest: res.Digest}); err != nil {
				t.Fatal(err)
			}
		}
		want := "prod/manifests.yaml,prod/web"
		names := func(rs []store.Release) string {
			var out []string
			for _, r := range rs {
				out = append(out, r.App)
			}
			return strings.Join(out, ",")
		}
		if rs, err := st.List(ctx, ""); err != nil || names(rs) != want {
			t.Errorf("prefix %q: List gives %q (%v), want %q", prefix, names(rs), err, want)
		}
		if rs, _, err := st.ListPage(ctx, "", store.ListOptions{Limit: 10}); err != nil || names(rs) != want {
			t.Errorf("prefix %q: ListPage gives %q (%v), want %q", prefix, names(rs), err, want)
		}
		var seen []string
		err := st.Histories(ctx, "", store.HistoriesOptions{}, func(app string, _ []store.Release) bool {
			seen = append(seen, app)
			return true
		})
		if err != nil || strings.Join(seen, ",") != want {
			t.Errorf("prefix %q: Histories gives %v (%v), want %q", prefix, seen, err, want)
		}
		if err := store.ValidateApp(floor.Dir); err == nil {
			t.Errorf("%s is a valid app name: an app could collide with the floors", floor.Dir)
		}
	}
}
