package ui

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/bucketops/bucketops/store"
)

// histories caches each app's version listing: generations are immutable,
// only the head moves, so a listing serves every page until the head's
// generation changes, and checking that costs one request.
type histories struct {
	src    Releases
	mu     sync.Mutex
	apps   map[string]listing
	builds singleflight.Group
}

type listing struct {
	head     int64
	releases []store.Release // newest first
}

func newHistories(src Releases) *histories {
	return &histories{src: src, apps: map[string]listing{}}
}

// get returns app's releases, newest first.
func (h *histories) get(ctx context.Context, app string) ([]store.Release, error) {
	head, err := h.src.Head(ctx, app)
	if errors.Is(err, store.ErrNotFound) {
		// No live head (deleted): whatever history there is, uncached.
		return h.src.History(ctx, app, store.HistoryOptions{})
	}
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	l, ok := h.apps[app]
	h.mu.Unlock()
	if ok && l.head == head.Generation {
		return l.releases, nil
	}
	v, err, _ := h.builds.Do(app, func() (any, error) {
		rels, err := h.src.History(ctx, app, store.HistoryOptions{})
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		h.apps[app] = listing{head: rels[0].Generation, releases: rels}
		h.mu.Unlock()
		return rels, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]store.Release), nil
}
