package store_test

import (
	"strconv"
	"testing"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// Every write records bucketops-format (a publish, a copy, a tombstone),
// and a release from before it reads as format 0: what the git view's
// commit format is chosen by, from the bucket alone.
func TestReleasesRecordTheirFormat(t *testing.T) {
	b := storetest.New(t, true)
	s := b.Store(t, "")
	ctx := t.Context()
	b.Put(t, "prod/old/"+store.ObjectName, manifest("prod/old", 1), map[string]string{"bucketops-digest": store.Digest(manifest("prod/old", 1))})
	old, err := s.Head(ctx, "prod/old")
	if err != nil || old.Format != 0 {
		t.Fatalf("a release from before bucketops-format: format %d, %v; want 0", old.Format, err)
	}
	pushed, err := s.Publish(ctx, "prod/payments", pub("prod/payments", 1))
	if err != nil {
		t.Fatal(err)
	}
	copied, err := s.Copy(ctx, old.Ref(), "prod/payments", store.Publication{})
	if err != nil {
		t.Fatal(err)
	}
	retired, err := s.Retire(ctx, "prod/payments", store.Publication{})
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]store.Result{"publish": pushed, "copy": copied, "retire": retired} {
		if got := b.Attrs(t, "prod/payments/"+store.ObjectName, r.Generation).Metadata["bucketops-format"]; got != strconv.Itoa(store.Format) || r.Format != store.Format {
			t.Errorf("%s: bucketops-format %q, Release.Format %d; want %d", what, got, r.Format, store.Format)
		}
	}
	hist, err := s.History(ctx, "prod/payments", store.HistoryOptions{})
	if err != nil || len(hist) != 3 || hist[2].Format != store.Format {
		t.Errorf("history: %+v %v", hist, err)
	}
}
