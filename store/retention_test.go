package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

const retainedRelease = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"

// A release published with a retention carries GCS Object Retention on its
// own generation, through a push and through a copy (promote, rollback):
// the generation a pusher with delete rights would delete to roll a
// signed chain back.
func TestPublishSetsObjectRetention(t *testing.T) {
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	ctx := t.Context()
	until := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	ret := &store.Retention{Until: until, Mode: store.RetentionLocked}
	res, err := st.Publish(ctx, "prod/web", store.Publication{Data: []byte(retainedRelease), Resources: 1, Retention: ret})
	if err != nil {
		t.Fatal(err)
	}
	copied, err := st.Copy(ctx, res.Ref(), "prod/api", store.Publication{Retention: &store.Retention{Until: until, Mode: store.RetentionUnlocked}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref  store.Ref
		mode string
	}{{res.Ref(), store.RetentionLocked}, {copied.Ref(), store.RetentionUnlocked}} {
		rel, err := st.Stat(ctx, c.ref)
		if err != nil {
			t.Fatal(err)
		}
		if !rel.RetainUntil.Equal(until) || rel.RetentionMode != c.mode {
			t.Errorf("%s: retained until %v (%q), want %v (%s)", c.ref, rel.RetainUntil, rel.RetentionMode, until, c.mode)
		}
	}
	// Without one, none.
	plain, err := st.Publish(ctx, "prod/plain", store.Publication{Data: []byte(retainedRelease), Resources: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !plain.RetainUntil.IsZero() {
		t.Errorf("a release published without retention is retained until %v", plain.RetainUntil)
	}
}

func TestPublishRefusesARetentionGCSWouldNot(t *testing.T) {
	st := storetest.New(t, true).Store(t, "")
	for name, c := range map[string]struct {
		ret  store.Retention
		want string
	}{
		"in the past":  {store.Retention{Until: time.Now().Add(-time.Hour), Mode: store.RetentionLocked}, "not in the future"},
		"unknown mode": {store.Retention{Until: time.Now().Add(time.Hour), Mode: "locked"}, "say Unlocked or Locked"},
	} {
		_, err := st.Publish(t.Context(), "prod/web", store.Publication{Data: []byte(retainedRelease), Resources: 1, Retention: &c.ret})
		if !errors.Is(err, store.ErrInvalidRetention) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidRetention saying %q", name, err, c.want)
		}
	}
	if _, err := st.Head(t.Context(), "prod/web"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused retention wrote a release: %v", err)
	}
}
