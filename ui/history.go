package ui

import (
	"context"
	"errors"

	"golang.org/x/sync/singleflight"

	"github.com/bucketops/bucketops/cache"
	"github.com/bucketops/bucketops/store"
)

// histories caches app histories, least recently used evicted first,
// within a budget of bytes. Generations are immutable, only the head
// moves, so a history serves every page until its head's generation
// changes. The timeline checks that with one request for the head; the
// fleet pages (as-of, activity) with the heads their listing of apps
// already holds, and read the histories they miss in one listing of the
// bucket's versions.
type histories struct {
	src    Releases
	cached *cache.LRU[string, history]
	builds singleflight.Group
}

// history is one app's releases, newest first, as of its head.
type history struct {
	head     int64
	releases []store.Release
}

func newHistories(src Releases, budget int64) *histories {
	return &histories{src: src, cached: cache.New[string, history](budget)}
}

// keep caches an app's history read while its head was releases[0];
// a history without a live head (deleted) is not kept: no head can tell
// when it changes.
func (h *histories) keep(app string, releases []store.Release) {
	if len(releases) == 0 || !releases[0].Current {
		return
	}
	size := int64(len(app) + 128)
	for _, r := range releases {
		size += r.Footprint()
	}
	h.cached.Add(app, history{head: releases[0].Generation, releases: releases}, size)
}

// at returns the cached history of head's app, if head is still its head.
func (h *histories) at(head store.Release) ([]store.Release, bool) {
	c, ok := h.cached.Get(head.App)
	if !ok || c.head != head.Generation {
		return nil, false
	}
	return c.releases, true
}

// get returns app's releases, newest first: one request for the head, and
// a listing of the app's versions when its history isn't cached.
func (h *histories) get(ctx context.Context, app string) ([]store.Release, error) {
	head, err := h.src.Head(ctx, app)
	if errors.Is(err, store.ErrNotFound) {
		// No live head (deleted): whatever history there is, uncached.
		return h.src.History(ctx, app, store.HistoryOptions{})
	}
	if err != nil {
		return nil, err
	}
	if rels, ok := h.at(head); ok {
		return rels, nil
	}
	v, err, _ := h.builds.Do(app, func() (any, error) {
		rels, err := h.src.History(ctx, app, store.HistoryOptions{})
		if err != nil {
			return nil, err
		}
		h.keep(app, rels)
		return rels, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]store.Release), nil
}

// each calls fn with each of heads (a page of the apps under prefix, as
// ListPage gives them) and its app's releases, newest first, in heads'
// order. The histories whose head hasn't moved come from the cache; the
// others from one listing of the bucket's versions spanning them, which
// ends before until (the app after the page; "" for none). So a page
// costs no request when its histories are cached, and one listing
// request per 1,000 releases of the apps it spans when they aren't,
// however many apps they are.
//
// An app whose history vanished since heads were listed (its object
// deleted) comes with none.
func (h *histories) each(ctx context.Context, prefix string, heads []store.Release, until string, fn func(head store.Release, releases []store.Release)) error {
	// What the cache holds now, held until used: the listing below adds
	// histories, and could evict these.
	known := make([][]store.Release, len(heads))
	first, last := -1, -1
	for i, head := range heads {
		if rels, ok := h.at(head); ok {
			known[i] = rels
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	next := 0 // heads[:next] have been given to fn
	if first >= 0 {
		if last+1 < len(heads) {
			until = heads[last+1].App
		}
		index := make(map[string]int, last+1-first)
		for i := first; i <= last; i++ {
			index[heads[i].App] = i
		}
		err := h.src.Histories(ctx, prefix, store.HistoriesOptions{From: heads[first].App, Until: until}, func(app string, rels []store.Release) bool {
			i, ok := index[app]
			if !ok || i < next {
				return true // an app with no live head, not on the page
			}
			for ; next < i; next++ {
				fn(heads[next], known[next])
			}
			h.keep(app, rels)
			fn(heads[i], rels)
			next = i + 1
			return true
		})
		if err != nil {
			return err
		}
	}
	for ; next < len(heads); next++ {
		fn(heads[next], known[next])
	}
	return nil
}

// bytes returns the bytes of the histories cached.
func (h *histories) bytes() int64 { return h.cached.Bytes() }
