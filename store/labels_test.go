package store_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

func TestLabelsAreStoredWithTheReleaseAndFollowCopies(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	ctx := t.Context()

	p := pub("staging/payments", 1)
	p.Labels = map[string]string{"team": "payments", "bucketops.dev/tier": "1"}
	res, err := s.Publish(ctx, "staging/payments", p)
	if err != nil {
		t.Fatal(err)
	}
	head, err := s.Head(ctx, "staging/payments")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(head.Labels, p.Labels) {
		t.Errorf("head labels %v, want %v", head.Labels, p.Labels)
	}

	// The same bytes with the same labels: nothing to publish.
	if again, err := s.Publish(ctx, "staging/payments", p); err != nil || !again.Unchanged {
		t.Errorf("same bytes and labels: %+v %v, want unchanged", again, err)
	}
	// The same bytes with other labels: a release, so the change reaches
	// the ApplicationSets.
	p.Labels, p.Sequence = map[string]string{"team": "checkout"}, 2
	moved, err := s.Publish(ctx, "staging/payments", p)
	if err != nil || moved.Unchanged || moved.Generation == res.Generation {
		t.Fatalf("same bytes, other labels: %+v %v, want a new release", moved, err)
	}

	// A promote keeps the source's labels unless it's given its own.
	if _, err := s.Copy(ctx, store.Ref{App: "staging/payments", Generation: moved.Generation}, "prod/payments", store.Publication{Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	prod, err := s.Head(ctx, "prod/payments")
	if err != nil {
		t.Fatal(err)
	}
	if prod.Labels["team"] != "checkout" || len(prod.Labels) != 1 {
		t.Errorf("promoted labels %v, want the source's", prod.Labels)
	}
	if _, err := s.Copy(ctx, store.Ref{App: "staging/payments", Generation: moved.Generation}, "prod/payments", store.Publication{Sequence: 2, Labels: map[string]string{"team": "prod-payments"}}); err != nil {
		t.Fatal(err)
	}
	if prod, _ = s.Head(ctx, "prod/payments"); prod.Labels["team"] != "prod-payments" {
		t.Errorf("promote --label: labels %v", prod.Labels)
	}
}

func TestInvalidLabelsAreRefusedBeforeAnyWrite(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	for name, labels := range map[string]map[string]string{
		"key with a space":   {"my team": "a"},
		"value with a slash": {"team": "a/b"},
		"key too long":       {strings.Repeat("k", 64): "a"},
		"value too long":     {"team": strings.Repeat("v", 64)},
		"comma in a value":   {"team": "a,b"},
		"empty key":          {"": "a"},
		"labels over 512 bytes": func() map[string]string {
			m := map[string]string{}
			for _, c := range "abcdefghijklmnop" {
				m[strings.Repeat(string(c), 30)] = strings.Repeat("v", 30)
			}
			return m
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			p := pub("prod/payments", 1)
			p.Labels = labels
			_, err := s.Publish(t.Context(), "prod/payments", p)
			if !errors.Is(err, store.ErrInvalidLabel) {
				t.Fatalf("publish: %v, want ErrInvalidLabel", err)
			}
			if _, err := s.Head(t.Context(), "prod/payments"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after a refused publish the app has a head: %v", err)
			}
		})
	}
}

func TestLabelsEncodingRoundTrips(t *testing.T) {
	labels := map[string]string{"team": "payments", "example.com/tier": "gold", "empty": ""}
	enc := store.EncodeLabels(labels)
	if enc != "empty=,example.com/tier=gold,team=payments" {
		t.Errorf("encoded %q: want sorted k=v pairs", enc)
	}
	if got := store.ParseLabels(enc); !maps.Equal(got, labels) {
		t.Errorf("parsed %v, want %v", got, labels)
	}
	// Metadata written by hand with a broken pair keeps the valid ones.
	if got := store.ParseLabels("team=payments,bad pair,x=a b"); len(got) != 1 || got["team"] != "payments" {
		t.Errorf("parsed %v, want only team=payments", got)
	}
}
