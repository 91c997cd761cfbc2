package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
)

// ListOptions pages through the apps under a prefix, in the bucket's order
// of object names (which is not quite the order of app names: dev/a-b
// comes before dev/a).
type ListOptions struct {
	// From is the first app of the page, the previous page's next; empty
	// starts at the first app.
	From string
	// Limit caps the apps of the page; 0 means all.
	Limit int
}

// ListPage returns the heads of at most opts.Limit apps under prefix from
// opts.From on, and the app the next page starts at ("" after the last
// page). A page costs one listing request per 1,000 apps on it, however
// many apps the bucket holds.
func (s *Store) ListPage(ctx context.Context, prefix string, opts ListOptions) ([]Release, string, error) {
	q, err := s.listQuery(prefix, opts.From, "")
	if err != nil {
		return nil, "", err
	}
	var out []Release
	it := s.bucket.Objects(ctx, q)
	if opts.Limit > 0 {
		// One more than the page, to know where the next one starts.
		it.PageInfo().MaxSize = min(opts.Limit+1, 1000)
	}
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, "", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("list %s: %w", s.loc, s.translate(ctx, err))
		}
		app, ok := s.loc.App(attrs.Name)
		if !ok {
			continue
		}
		if opts.Limit > 0 && len(out) == opts.Limit {
			return out, app, nil
		}
		out = append(out, s.release(app, attrs, true))
	}
}

// HistoriesOptions bounds a scan of histories to a run of apps, in the
// bucket's order of object names.
type HistoriesOptions struct {
	// From is the first app scanned; empty starts at the first one.
	From string
	// Until is the first app not scanned (a ListPage next); empty scans to
	// the last one.
	Until string
}

// Histories calls fn with each app under prefix that has releases and its
// releases, newest first, one app at a time in the bucket's order of
// object names, until fn returns false. An app whose head was deleted
// comes with its noncurrent releases only (Current false on each).
//
// It is one paged listing of the bucket's versions: a request per 1,000
// releases, however many apps they belong to, where History costs at least
// one request per app. It holds one app's history at a time.
func (s *Store) Histories(ctx context.Context, prefix string, opts HistoriesOptions, fn func(app string, newestFirst []Release) bool) error {
	q, err := s.listQuery(prefix, opts.From, opts.Until)
	if err != nil {
		return err
	}
	q.Versions = true
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Created", "Deleted", "Size", "ContentEncoding", "Metadata"}); err != nil {
		return err
	}
	// GCS lists by object name, so an app's versions come together.
	var app string
	var rels []Release
	flush := func() bool {
		if len(rels) == 0 {
			return true
		}
		slices.SortFunc(rels, func(a, b Release) int { return cmp.Compare(b.Generation, a.Generation) })
		more := fn(app, rels)
		rels = nil
		return more
	}
	it := s.bucket.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			flush()
			return nil
		}
		if err != nil {
			return fmt.Errorf("histories under %s: %w", s.loc, s.translate(ctx, err))
		}
		a, ok := s.loc.App(attrs.Name)
		if !ok {
			continue
		}
		if a != app && !flush() {
			return nil
		}
		app = a
		rels = append(rels, s.release(a, attrs, attrs.Deleted.IsZero()))
	}
}

// listQuery lists the objects under prefix (whole segments below the
// location's prefix) from app from on and before app until.
func (s *Store) listQuery(prefix, from, until string) (*storage.Query, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	q := &storage.Query{}
	parts := []string{}
	if s.loc.Prefix != "" {
		parts = append(parts, s.loc.Prefix)
	}
	if p := strings.Trim(prefix, "/"); p != "" {
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		q.Prefix = strings.Join(parts, "/") + "/"
	}
	for _, b := range []struct {
		app    string
		offset *string
	}{{from, &q.StartOffset}, {until, &q.EndOffset}} {
		if b.app == "" {
			continue
		}
		if err := ValidateApp(b.app); err != nil {
			return nil, err
		}
		*b.offset = s.objectName(b.app)
	}
	return q, nil
}

// Footprint is about the bytes r holds in memory: what a cache of releases
// weighs it by.
func (r Release) Footprint() int64 {
	n := 320 + len(r.App) + len(r.Source) + len(r.Author) + len(r.Message) + len(r.Digest) +
		len(r.Origin) + len(r.Kind) + len(r.Encoding) + len(r.PublishID) + len(r.Signature)
	for k, v := range r.Labels {
		n += 64 + len(k) + len(v)
	}
	return int64(n)
}
