package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

func manifest(app string, n int) []byte {
	return fmt.Appendf(nil, "# Source: cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  n: %q\n", strings.ReplaceAll(app, "/", "-"), fmt.Sprint(n))
}

func pub(app string, n int) store.Publication {
	return store.Publication{Data: manifest(app, n), Sequence: uint64(n), Author: "ci@example", Source: fmt.Sprintf("commit-%d", n), Resources: 1}
}

func TestPublishManyWritersOnManyApps(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	const apps, releases = 32, 4
	var wg sync.WaitGroup
	errs := make(chan error, apps*releases)
	for a := range apps {
		wg.Go(func() {
			app := fmt.Sprintf("team%d/app", a)
			for n := 1; n <= releases; n++ {
				if _, err := s.Publish(t.Context(), app, pub(app, n)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("publish failed: %v", err)
	}
	for a := range apps {
		app := fmt.Sprintf("team%d/app", a)
		hist, err := s.History(t.Context(), app, store.HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != releases || hist[0].Sequence != releases || !hist[0].Current {
			t.Errorf("%s: history %d releases with head sequence %d, want %d with head %d", app, len(hist), hist[0].Sequence, releases, releases)
		}
	}
}

func TestPublishConcurrentWritersOnOneAppConvergeOnHighestSequence(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	const writers = 16
	app := "prod/payments"
	var accepted, stale atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for n := 1; n <= writers; n++ {
		wg.Go(func() {
			<-start
			res, err := s.Publish(t.Context(), app, pub(app, n))
			switch {
			case errors.Is(err, store.ErrStale):
				stale.Add(1)
			case err != nil:
				t.Errorf("writer %d: %v", n, err)
			case res.Unchanged:
				t.Errorf("writer %d: unchanged, but its bytes were unique", n)
			default:
				accepted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()

	hist, err := s.History(t.Context(), app, store.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hist[0].Sequence != writers {
		t.Errorf("head has sequence %d, want the highest, %d", hist[0].Sequence, writers)
	}
	if int64(len(hist)) != accepted.Load() {
		t.Errorf("history holds %d generations for %d accepted publishes", len(hist), accepted.Load())
	}
	if accepted.Load()+stale.Load() != writers {
		t.Errorf("%d accepted + %d stale != %d writers", accepted.Load(), stale.Load(), writers)
	}
	// Newest first, every older generation has a lower sequence: no
	// writer ever overwrote a newer release.
	for i := 1; i < len(hist); i++ {
		if hist[i].Sequence >= hist[i-1].Sequence {
			t.Errorf("generation %d (sequence %d) was followed by %d (sequence %d): a stale overwrite",
				hist[i].Generation, hist[i].Sequence, hist[i-1].Generation, hist[i-1].Sequence)
		}
	}
	_, data, err := s.Read(t.Context(), store.Ref{App: app})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, manifest(app, writers)) {
		t.Errorf("head bytes are not those of the highest sequence:\n%s", data)
	}
}

func TestPublishRepeatedIsUnchanged(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	first, err := s.Publish(t.Context(), "dev/api", pub("dev/api", 1))
	if err != nil {
		t.Fatal(err)
	}
	before := tb.Requests.Load()
	again, err := s.Publish(t.Context(), "dev/api", pub("dev/api", 1))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Unchanged || again.Generation != first.Generation {
		t.Errorf("re-push: unchanged=%v generation %d, want unchanged at %d", again.Unchanged, again.Generation, first.Generation)
	}
	if n := tb.Requests.Load() - before; n != 1 {
		t.Errorf("a re-push made %d requests, want 1 (read the head)", n)
	}
	// The same bytes from an older build are unchanged too: the head serves
	// them already, at a newer sequence.
	p := pub("dev/api", 1)
	p.Sequence = 0
	if res, err := s.Publish(t.Context(), "dev/api", p); err != nil || !res.Unchanged {
		t.Errorf("same bytes, no sequence: %+v, %v; want unchanged", res, err)
	}
	hist, _ := s.History(t.Context(), "dev/api", store.HistoryOptions{})
	if len(hist) != 1 {
		t.Errorf("history has %d generations, want 1", len(hist))
	}
}

func TestPublishRefusesStaleAndConflictingSequences(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	app := "prod/web"
	head, err := s.Publish(t.Context(), app, pub(app, 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(t.Context(), app, pub(app, 3)); !errors.Is(err, store.ErrStale) {
		t.Errorf("an older sequence: %v, want ErrStale", err)
	} else if !strings.Contains(err.Error(), "sequence 5") {
		t.Errorf("the stale error doesn't name the head's sequence: %v", err)
	}
	same := pub(app, 6)
	same.Sequence = 5
	if _, err := s.Publish(t.Context(), app, same); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same sequence with other bytes: %v, want ErrConflict", err)
	}
	now, err := s.Head(t.Context(), app)
	if err != nil || now.Generation != head.Generation {
		t.Errorf("head moved to %d (%v) after refused publishes, want %d", now.Generation, err, head.Generation)
	}
	// A release without a sequence keeps the head's, so the guard holds
	// for whatever comes after it.
	unordered := pub(app, 9)
	unordered.Sequence = 0
	res, err := s.Publish(t.Context(), app, unordered)
	if err != nil || res.Sequence != 5 {
		t.Errorf("a release without sequence: %+v %v; want it published carrying sequence 5", res.Release, err)
	}
	if _, err := s.Publish(t.Context(), app, pub(app, 4)); !errors.Is(err, store.ErrStale) {
		t.Errorf("an older sequence after a release without one: %v, want ErrStale", err)
	}
	if _, err := s.Retire(t.Context(), app, store.Publication{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(t.Context(), app, pub(app, 2)); !errors.Is(err, store.ErrStale) {
		t.Errorf("an old pipeline after retire: %v, want ErrStale (it must not revive the app)", err)
	}
	if _, err := s.Publish(t.Context(), app, pub(app, 6)); err != nil {
		t.Errorf("a newer pipeline after retire: %v", err)
	}
}

func TestPublishStrictMode(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	app := "prod/db"
	zero := int64(0)
	p := pub(app, 1)
	p.IfGeneration = &zero
	first, err := s.Publish(t.Context(), app, p)
	if err != nil {
		t.Fatalf("strict create of a new app: %v", err)
	}
	p = pub(app, 2)
	p.IfGeneration = &zero
	if _, err := s.Publish(t.Context(), app, p); !errors.Is(err, store.ErrConflict) {
		t.Errorf("strict create over an existing app: %v, want ErrConflict", err)
	}
	wrong := first.Generation - 1
	p.IfGeneration = &wrong
	before := tb.Requests.Load()
	if _, err := s.Publish(t.Context(), app, p); !errors.Is(err, store.ErrConflict) {
		t.Errorf("strict write on a wrong generation: %v, want ErrConflict", err)
	} else if !strings.Contains(err.Error(), first.Ref().String()) {
		t.Errorf("the conflict doesn't name the head %s: %v", first.Ref(), err)
	}
	if n := tb.Requests.Load() - before; n > 2 {
		t.Errorf("strict mode made %d requests, want one attempt (at most 2 requests)", n)
	}
	p.IfGeneration = &first.Generation
	second, err := s.Publish(t.Context(), app, p)
	if err != nil || second.Generation <= first.Generation {
		t.Errorf("strict write on the head's generation: %+v, %v", second, err)
	}
}

func TestPromoteAndRollbackRecordOrigin(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	v1, err := s.Publish(t.Context(), "staging/api", pub("staging/api", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(t.Context(), "staging/api", pub("staging/api", 2)); err != nil {
		t.Fatal(err)
	}
	promoted, err := s.Copy(t.Context(), store.Ref{App: "staging/api", Generation: v1.Generation}, "prod/api", store.Publication{Author: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if promoted.Origin != v1.Ref().String() || promoted.Source != "commit-1" || promoted.Author != "alice" || promoted.Resources != 1 {
		t.Errorf("promoted release: %+v; want origin %s, source commit-1, author alice", promoted.Release, v1.Ref())
	}
	_, data, err := s.Read(t.Context(), store.Ref{App: "prod/api"})
	if err != nil || !bytes.Equal(data, manifest("staging/api", 1)) {
		t.Errorf("prod/api holds %q (%v), want staging/api@%d's bytes", data, err, v1.Generation)
	}

	// Roll staging back to its first release.
	back, err := s.Copy(t.Context(), store.Ref{App: "staging/api", Generation: v1.Generation}, "staging/api", store.Publication{Message: "rollback"})
	if err != nil {
		t.Fatal(err)
	}
	if back.Origin != v1.Ref().String() || back.Generation <= v1.Generation {
		t.Errorf("rollback: %+v", back.Release)
	}
	hist, _ := s.History(t.Context(), "staging/api", store.HistoryOptions{})
	if len(hist) != 3 || hist[0].Digest != v1.Digest {
		t.Errorf("after rollback the history has %d releases and head digest %s, want 3 and %s", len(hist), hist[0].Digest, v1.Digest)
	}
	if _, err := s.Copy(t.Context(), store.Ref{App: "staging/api", Generation: 42}, "prod/api", store.Publication{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("copy of an unknown generation: %v, want ErrNotFound", err)
	}
}

func TestRetirePublishesTombstone(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	if _, err := s.Publish(t.Context(), "dev/old", pub("dev/old", 1)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Retire(t.Context(), "dev/old", store.Publication{Author: "bob", Message: "decommissioned"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != store.KindTombstone || res.Size != 0 {
		t.Errorf("retire: %+v, want an empty tombstone", res.Release)
	}
	rel, data, err := s.Read(t.Context(), store.Ref{App: "dev/old"})
	if err != nil || len(data) != 0 || rel.Kind != store.KindTombstone {
		t.Errorf("read after retire: %+v %q %v", rel, data, err)
	}
	again, err := s.Retire(t.Context(), "dev/old", store.Publication{})
	if err != nil || !again.Unchanged {
		t.Errorf("retiring twice: %+v %v, want unchanged", again, err)
	}
	if _, err := s.Copy(t.Context(), store.Ref{App: "dev/old"}, "prod/old", store.Publication{}); err == nil {
		t.Error("promoting a tombstone succeeded")
	}
	if _, err := s.Retire(t.Context(), "dev/never", store.Publication{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retiring an app that never existed: %v, want ErrNotFound", err)
	}
	if _, err := s.Publish(t.Context(), "dev/empty", store.Publication{}); err == nil {
		t.Error("an empty release was published; only a tombstone may be empty")
	}
}

func TestHistoryPagesNewestFirst(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "teams")
	var gens []int64
	for n := 1; n <= 25; n++ {
		res, err := s.Publish(t.Context(), "prod/api", pub("prod/api", n))
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, res.Generation)
	}
	// A neighbour whose name shares the prefix must not leak into the history.
	if _, err := s.Publish(t.Context(), "prod/api2", pub("prod/api2", 1)); err != nil {
		t.Fatal(err)
	}
	var got []int64
	var before int64
	for page := 0; ; page++ {
		rs, err := s.History(t.Context(), "prod/api", store.HistoryOptions{Limit: 10, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			break
		}
		if page > 3 {
			t.Fatal("paging never ends")
		}
		for _, r := range rs {
			got = append(got, r.Generation)
		}
		before = rs[len(rs)-1].Generation
	}
	if len(got) != len(gens) {
		t.Fatalf("paged history has %d releases, want %d", len(got), len(gens))
	}
	for i := range got {
		if want := gens[len(gens)-1-i]; got[i] != want {
			t.Fatalf("release %d of the history is generation %d, want %d (newest first)", i, got[i], want)
		}
	}
	if _, err := s.History(t.Context(), "prod/none", store.HistoryOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("history of an unknown app: %v, want ErrNotFound", err)
	}
}

func TestReadByGenerationAndDigest(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	app := "prod/pay"
	v1, _ := s.Publish(t.Context(), app, pub(app, 1))
	if _, err := s.Publish(t.Context(), app, pub(app, 2)); err != nil {
		t.Fatal(err)
	}
	rel, data, err := s.Read(t.Context(), v1.Ref())
	if err != nil || !bytes.Equal(data, manifest(app, 1)) || rel.Current || rel.Sequence != 1 {
		t.Errorf("read %s: %+v %q %v; want the first bytes, noncurrent", v1.Ref(), rel, data, err)
	}
	if _, _, err := s.Read(t.Context(), store.Ref{App: app, Generation: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read of a generation that never existed: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Read(t.Context(), store.Ref{App: "prod/missing"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read of an unknown app: %v, want ErrNotFound", err)
	}

	// Someone overwrites the object with other bytes, keeping the metadata.
	tb.Put(t, app+"/manifests.yaml", []byte("kind: Evil\n"), map[string]string{"bucketops-digest": v1.Digest})
	if _, _, err := s.Read(t.Context(), store.Ref{App: app}); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("read of bytes that don't match their digest: %v, want ErrCorrupt", err)
	}
}

func TestPublishBacksOffOnTooManyRequests(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	if _, err := s.Publish(t.Context(), "prod/hot", pub("prod/hot", 1)); err != nil {
		t.Fatal(err)
	}
	// GCS allows about one write per second per object: the writes are
	// refused, the reads go through.
	var throttled atomic.Int64
	tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || throttled.Add(1) > 3 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"code":429,"message":"The object exceeded the rate limit for object mutation operations"}}`)
		return true
	})
	res, err := s.Publish(t.Context(), "prod/hot", pub("prod/hot", 2))
	if err != nil {
		t.Fatalf("publish through throttled writes: %v", err)
	}
	if res.Attempts != 4 || s.Retries() < 3 {
		t.Errorf("%d attempts and %d retries for 3 throttled writes, want 4 attempts", res.Attempts, s.Retries())
	}
	hist, err := s.History(t.Context(), "prod/hot", store.HistoryOptions{})
	if err != nil || len(hist) != 2 || hist[0].Generation != res.Generation {
		t.Errorf("history after a throttled publish: %+v %v, want the release exactly once", hist, err)
	}

	// A write GCS stored but whose answer was lost (a 503 after the fact)
	// is found on the next read of the head, not written twice.
	var lost atomic.Bool
	tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || !lost.CompareAndSwap(false, true) {
			return false
		}
		tb.Server.HTTPHandler().ServeHTTP(httptest.NewRecorder(), r)
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	res, err = s.Publish(t.Context(), "prod/hot", pub("prod/hot", 3))
	if err != nil || res.Unchanged || res.Sequence != 3 {
		t.Fatalf("publish whose answer was lost: %+v %v", res, err)
	}
	if hist, _ := s.History(t.Context(), "prod/hot", store.HistoryOptions{}); len(hist) != 3 {
		t.Errorf("history has %d releases after a lost answer, want 3 (no duplicate generation)", len(hist))
	}

	// Throttled for good: the publish gives up when its context ends, with a
	// message that says so.
	tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.Publish(ctx, "prod/hot", pub("prod/hot", 4)); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("publish against a bucket that only answers 503: %v, want a deadline error", err)
	}
}

func TestBucketChecks(t *testing.T) {
	t.Run("an unversioned bucket is refused before anything is written", func(t *testing.T) {
		tb := storetest.New(t, false)
		s := tb.Store(t, "")
		_, err := s.Publish(t.Context(), "prod/api", pub("prod/api", 1))
		if !errors.Is(err, store.ErrBucket) || !strings.Contains(err.Error(), "--versioning") {
			t.Errorf("publish to an unversioned bucket: %v, want ErrBucket telling how to turn versioning on", err)
		}
		objs, _, _ := tb.Server.ListObjects(storetest.BucketName, "", "", true)
		if len(objs) != 0 {
			t.Errorf("%d objects written to an unversioned bucket", len(objs))
		}
	})
	t.Run("an unversioned bucket is not checked again once the app has releases", func(t *testing.T) {
		// The documented limit: a publish costs two requests, so only an
		// app's first release checks the bucket's settings.
		tb := storetest.New(t, false)
		s := tb.Store(t, "")
		tb.Put(t, "prod/api/manifests.yaml", []byte("x"), map[string]string{"bucketops-digest": "sha256:x"})
		before := tb.Requests.Load()
		if _, err := s.Publish(t.Context(), "prod/api", pub("prod/api", 1)); err != nil {
			t.Fatal(err)
		}
		if n := tb.Requests.Load() - before; n != 2 {
			t.Errorf("%d requests", n)
		}
	})
	t.Run("a missing bucket is named", func(t *testing.T) {
		tb := storetest.New(t, true)
		s := store.New(tb.Client, store.Location{Bucket: "nope"}, slog.New(slog.DiscardHandler))
		_, err := s.Publish(t.Context(), "prod/api", pub("prod/api", 1))
		if !errors.Is(err, store.ErrBucket) || !strings.Contains(err.Error(), "nope") {
			t.Errorf("publish to a missing bucket: %v, want ErrBucket naming it", err)
		}
	})
	t.Run("invalid app names make no request", func(t *testing.T) {
		tb := storetest.New(t, true)
		s := tb.Store(t, "")
		for _, app := range []string{"../x", "Prod", "a//b", "/a", "a/", "", strings.Repeat("a", 513), "a/../b", "a..b", "a b", "prod/%2e%2e"} {
			if _, err := s.Publish(t.Context(), app, pub("x", 1)); !errors.Is(err, store.ErrInvalidApp) {
				t.Errorf("publish to %q: %v, want ErrInvalidApp", app, err)
			}
		}
		if n := tb.Requests.Load(); n != 0 {
			t.Errorf("%d requests made for invalid names", n)
		}
	})
}

func TestListAppsUnderPrefix(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "clusters/eu")
	for _, app := range []string{"prod/api", "prod/web", "dev/api"} {
		if _, err := s.Publish(t.Context(), app, pub(app, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Objects that aren't releases are not apps.
	tb.Put(t, "clusters/eu/prod/notes.txt", []byte("hi"), nil)
	if err := tb.Client.Bucket(storetest.BucketName).Object("other/prod/x/manifests.yaml").NewWriter(t.Context()).Close(); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range all {
		names = append(names, r.App)
	}
	if got := strings.Join(names, ","); got != "dev/api,prod/api,prod/web" {
		t.Errorf("apps: %s", got)
	}
	prod, err := s.List(t.Context(), "prod")
	if err != nil || len(prod) != 2 {
		t.Errorf("apps under prod: %+v %v", prod, err)
	}
}

// Hole 1 of the review: the same bytes offered at a higher sequence used to
// be "unchanged", leaving the head at the lower sequence, so an older build
// with other bytes could overwrite it afterwards.
func TestSameBytesAtAHigherSequenceRaiseTheHeadsSequence(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	app := "prod/payments"
	x := pub(app, 1)
	x.Sequence = 10
	if _, err := s.Publish(t.Context(), app, x); err != nil {
		t.Fatal(err)
	}
	// Build 30 rebuilds with unchanged output (or reverts to X).
	x.Sequence = 30
	res, err := s.Publish(t.Context(), app, x)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged || res.Sequence != 30 {
		t.Errorf("build 30 with build 10's bytes: unchanged=%v sequence %d; want a release recording sequence 30", res.Unchanged, res.Sequence)
	}
	// Build 20, late, with other bytes: it must not win.
	y := pub(app, 2)
	y.Sequence = 20
	if _, err := s.Publish(t.Context(), app, y); !errors.Is(err, store.ErrStale) {
		t.Errorf("build 20 after build 30: %v, want ErrStale", err)
	}
	_, data, err := s.Read(t.Context(), store.Ref{App: app})
	if err != nil || !bytes.Equal(data, x.Data) {
		t.Errorf("the head holds %q (%v), want build 30's bytes", data, err)
	}
	// A retry of build 30, and build 10 again, change nothing.
	before := res.Generation
	for _, seq := range []uint64{30, 10} {
		x.Sequence = seq
		again, err := s.Publish(t.Context(), app, x)
		if err != nil || !again.Unchanged || again.Generation != before {
			t.Errorf("same bytes at sequence %d after 30: %+v %v, want unchanged at %d", seq, again.Release, err, before)
		}
	}

	t.Run("promote and rollback share the rule", func(t *testing.T) {
		src := "staging/payments"
		v, err := s.Publish(t.Context(), src, pub(src, 7))
		if err != nil {
			t.Fatal(err)
		}
		dst := "prod/orders"
		if _, err := s.Copy(t.Context(), v.Ref(), dst, store.Publication{Sequence: 10}); err != nil {
			t.Fatal(err)
		}
		res, err := s.Copy(t.Context(), v.Ref(), dst, store.Publication{Sequence: 30})
		if err != nil || res.Unchanged || res.Sequence != 30 {
			t.Fatalf("the same release promoted at a higher sequence: %+v %v, want a new head at sequence 30", res.Release, err)
		}
		late := pub(dst, 9)
		late.Sequence = 20
		if _, err := s.Publish(t.Context(), dst, late); !errors.Is(err, store.ErrStale) {
			t.Errorf("build 20 after the promotion at 30: %v, want ErrStale", err)
		}
	})
}

// Hole 2 of the review: after an error that may hide a write, the writer
// recognises its own release by its publish id, not by its bytes.
func TestUncertainWritesAreReportedTruthfully(t *testing.T) {
	// failFirstWrite answers the first upload with 503, after running
	// meanwhile (another writer's publish) and, if land is true, after
	// letting the upload itself through.
	failFirstWrite := func(tb *storetest.Bucket, land bool, meanwhile func()) {
		var done atomic.Bool
		tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, "/upload/") || !done.CompareAndSwap(false, true) {
				return false
			}
			if land {
				tb.Server.HTTPHandler().ServeHTTP(httptest.NewRecorder(), r)
			}
			meanwhile()
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		})
	}

	t.Run("an older pipeline's identical release is not taken for ours", func(t *testing.T) {
		tb := storetest.New(t, true)
		s := tb.Store(t, "")
		app := "prod/api"
		if _, err := s.Publish(t.Context(), app, pub(app, 10)); err != nil {
			t.Fatal(err)
		}
		ours := pub(app, 20)
		older := ours
		older.Sequence = 15
		older.Author = "build-15"
		failFirstWrite(tb, false, func() {
			if _, err := s.Publish(t.Context(), app, older); err != nil {
				t.Errorf("the older pipeline's publish: %v", err)
			}
		})
		res, err := s.Publish(t.Context(), app, ours)
		if err != nil {
			t.Fatal(err)
		}
		head, err := s.Head(t.Context(), app)
		if err != nil {
			t.Fatal(err)
		}
		if res.Sequence != 20 || head.Sequence != 20 || head.Generation != res.Generation || head.Author != ours.Author {
			t.Errorf("reported %s at sequence %d; the head is %s at sequence %d by %s; want both ours, at 20", res.Ref(), res.Sequence, head.Ref(), head.Sequence, head.Author)
		}
	})

	t.Run("a write that landed and was superseded is published, not stale", func(t *testing.T) {
		tb := storetest.New(t, true)
		s := tb.Store(t, "")
		app := "prod/web"
		if _, err := s.Publish(t.Context(), app, pub(app, 10)); err != nil {
			t.Fatal(err)
		}
		var newer store.Result
		failFirstWrite(tb, true, func() {
			var err error
			if newer, err = s.Publish(t.Context(), app, pub(app, 30)); err != nil {
				t.Errorf("the newer pipeline's publish: %v", err)
			}
		})
		res, err := s.Publish(t.Context(), app, pub(app, 20))
		if err != nil {
			t.Fatalf("a write that landed: %v, want it reported as published", err)
		}
		if res.Sequence != 20 || res.SupersededBy != newer.Generation || res.Generation >= newer.Generation || res.Unchanged {
			t.Errorf("reported %+v; want our release at sequence 20, superseded by %d", res, newer.Generation)
		}
		hist, _ := s.History(t.Context(), app, store.HistoryOptions{})
		if len(hist) != 3 {
			t.Errorf("history has %d releases, want 3 (ours written once)", len(hist))
		}
	})

	t.Run("a write that landed and was replaced by the same bytes at a newer sequence", func(t *testing.T) {
		tb := storetest.New(t, true)
		s := tb.Store(t, "")
		app := "prod/db"
		if _, err := s.Publish(t.Context(), app, pub(app, 10)); err != nil {
			t.Fatal(err)
		}
		ours := pub(app, 20)
		newer := ours
		newer.Sequence = 30
		var n store.Result
		failFirstWrite(tb, true, func() {
			var err error
			if n, err = s.Publish(t.Context(), app, newer); err != nil {
				t.Errorf("the newer pipeline's publish: %v", err)
			}
		})
		res, err := s.Publish(t.Context(), app, ours)
		if err != nil || res.Unchanged || res.SupersededBy != n.Generation || res.Sequence != 20 {
			t.Errorf("reported %+v (%v); want our release at 20, superseded by %d", res, err, n.Generation)
		}
	})
}

func TestHistoryPageCostsFollowThePage(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	app := "prod/api"
	// A history longer than one listing page (1,000), written directly
	// into the emulator: publishing it would take minutes.
	const history = 1500
	for n := 1; n <= history; n++ {
		data := manifest(app, n)
		tb.Server.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{
				BucketName: storetest.BucketName, Name: app + "/manifests.yaml", Generation: int64(n),
				ContentType: store.ContentType,
				Metadata:    map[string]string{"bucketops-digest": store.Digest(data), "bucketops-sequence": strconv.Itoa(n)},
			},
			Content: data,
		})
	}
	// GCS lists versions oldest first, a page of 1,000 per request (the
	// emulator answers in one), so only reads that don't list cost the
	// same whatever the history's length.
	var listings atomic.Int64
	tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o") {
			listings.Add(1)
		}
		return false
	})
	before := tb.Requests.Load()
	hist, err := s.History(t.Context(), app, store.HistoryOptions{Limit: 1})
	if err != nil || len(hist) != 1 || hist[0].Generation != history || !hist[0].Current {
		t.Fatalf("the newest release: %+v %v", hist, err)
	}
	if n, l := tb.Requests.Load()-before, listings.Load(); n != 1 || l != 0 {
		t.Errorf("the newest release cost %d requests, %d of them listings; want 1 (the head's attributes), no listing", n, l)
	}
	page, err := s.History(t.Context(), app, store.HistoryOptions{Limit: 5, Before: history})
	if err != nil || len(page) != 5 || page[0].Sequence != history-1 || page[4].Sequence != history-5 {
		t.Errorf("the page before the head: %+v %v, want sequences %d to %d", page, err, history-1, history-5)
	}
}

// Promote and rollback are conditional on the destination's head like any
// publish: a copy racing a newer release is refused, not written over it.
// (storetest checks copies' preconditions as GCS does; fake-gcs-server
// alone doesn't.)
func TestCopyRacingANewerReleaseIsRefused(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	v, err := s.Publish(t.Context(), "staging/api", pub("staging/api", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(t.Context(), "prod/api", pub("prod/api", 10)); err != nil {
		t.Fatal(err)
	}
	var newer store.Result
	var raced atomic.Bool
	tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/rewriteTo/") && raced.CompareAndSwap(false, true) {
			// Between the copy's read of the head and its write, a newer
			// pipeline publishes.
			var err error
			if newer, err = s.Publish(t.Context(), "prod/api", pub("prod/api", 30)); err != nil {
				t.Errorf("the newer publish: %v", err)
			}
		}
		return false
	})
	_, err = s.Copy(t.Context(), v.Ref(), "prod/api", store.Publication{Sequence: 20})
	if !raced.Load() {
		t.Fatal("the copy made no rewrite request to race")
	}
	if !errors.Is(err, store.ErrStale) {
		t.Errorf("a copy at sequence 20 racing a release at 30: %v, want ErrStale after the retry", err)
	}
	head, err := s.Head(t.Context(), "prod/api")
	if err != nil || head.Generation != newer.Generation {
		t.Errorf("the head is %+v (%v), want the newer release %d", head, err, newer.Generation)
	}
}
