package gitview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/sync/singleflight"

	"github.com/bucketops/bucketops/cache"
	"github.com/bucketops/bucketops/store"
)

// Source is what the view reads from the bucket (store.Store).
type Source interface {
	Head(ctx context.Context, app string) (store.Release, error)
	// History is newest first; an unknown app wraps store.ErrNotFound.
	History(ctx context.Context, app string, opts store.HistoryOptions) ([]store.Release, error)
}

// Config is the view's dependencies and limits.
type Config struct {
	Source   Source
	Location store.Location
	Logger   *slog.Logger
	// CacheBytes bounds the memory of the apps' commits the view keeps
	// (about 1.7 KiB per release), the least recently asked for evicted
	// first; 0 means DefaultCacheBytes. An evicted app is built again from
	// its history when next asked for, with the same SHAs; an app whose
	// commits alone exceed the budget is built for every request.
	CacheBytes int64
}

// DefaultCacheBytes is the memory the view keeps commits in by default.
const DefaultCacheBytes = 128 << 20

// View serves each app's releases as a git repository.
type View struct {
	src Source
	loc store.Location
	log *slog.Logger

	mu     sync.Mutex // makes finding or adding a chain one step
	chains *cache.LRU[string, *chain]
	builds singleflight.Group
}

// New returns a View.
func New(cfg Config) (*View, error) {
	var errs []error
	if cfg.Source == nil {
		errs = append(errs, errors.New("gitview: no source"))
	}
	if cfg.Logger == nil {
		errs = append(errs, errors.New("gitview: no logger"))
	}
	if cfg.Location.Bucket == "" {
		errs = append(errs, errors.New("gitview: no bucket"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	return &View{src: cfg.Source, loc: cfg.Location, log: cfg.Logger, chains: cache.New[string, *chain](cfg.CacheBytes)}, nil
}

// CachedBytes returns the memory of the commits the view keeps, at most
// Config.CacheBytes: what the bridge's bucketops_gitview_cache_bytes
// gauge reports.
func (v *View) CachedBytes() int64 { return v.chains.Bytes() }

// entry is one release's commit.
type entry struct {
	release            store.Release
	commit, tree, blob plumbing.Hash
}

// chain is one app's commits. Entries and objects are only ever appended;
// a snapshot is a prefix of entries that never changes, so a pack is
// encoded from a snapshot without any lock held while a new release is
// appended.
type chain struct {
	app     string
	objects *objects

	mu       sync.RWMutex // guards positions; appends hold it for writing
	entries  []entry
	position map[plumbing.Hash]int // commit → index in entries

	snap atomic.Pointer[snapshot]
	// size is about the memory the chain holds, what the view's cache
	// weighs it by.
	size atomic.Int64
}

// Weights of a chain in memory beyond its objects' contents: a chain, and
// per release its entry, position and three objects in their maps.
const (
	chainBytes = 1024
	entryBytes = 640
)

// snapshot is an app's history up to one release.
type snapshot struct {
	chain   *chain
	entries []entry // oldest first; never appended to through this slice
}

func (s *snapshot) head() entry { return s.entries[len(s.entries)-1] }

// find returns the index of commit h, if it is in the snapshot.
func (s *snapshot) find(h plumbing.Hash) (int, bool) {
	s.chain.mu.RLock()
	i, ok := s.chain.position[h]
	s.chain.mu.RUnlock()
	return i, ok && i < len(s.entries)
}

// generation returns the index of the release of generation gen.
func (s *snapshot) generation(gen int64) (int, bool) {
	return slices.BinarySearchFunc(s.entries, gen, func(e entry, g int64) int {
		switch {
		case e.release.Generation < g:
			return -1
		case e.release.Generation > g:
			return 1
		}
		return 0
	})
}

// append adds releases newer than the chain's last, oldest first, and
// publishes a new snapshot.
func (c *chain) append(loc store.Location, rels []store.Release) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parent := plumbing.ZeroHash
	var last int64
	if n := len(c.entries); n > 0 {
		parent, last = c.entries[n-1].commit, c.entries[n-1].release.Generation
	}
	for _, rel := range rels {
		if rel.Generation <= last {
			continue
		}
		blob, tree, commit, err := commitObjects(loc, rel, parent)
		if err != nil {
			return err
		}
		c.objects.add(blob, tree, commit)
		c.size.Add(rel.Footprint() + entryBytes + blob.Size() + tree.Size() + commit.Size())
		c.position[commit.Hash()] = len(c.entries)
		c.entries = append(c.entries, entry{release: rel, commit: commit.Hash(), tree: tree.Hash(), blob: blob.Hash()})
		parent, last = commit.Hash(), rel.Generation
	}
	if len(c.entries) > 0 {
		c.snap.Store(&snapshot{chain: c, entries: c.entries[:len(c.entries):len(c.entries)]})
	}
	return nil
}

// chainOf returns app's chain, making it if needed, most recently used
// first.
func (v *View) chainOf(app string) *chain {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.chains.Get(app); ok {
		return c
	}
	c := &chain{app: app, objects: newObjects(), position: map[plumbing.Hash]int{}}
	c.size.Store(chainBytes)
	v.chains.Add(app, c, c.size.Load())
	return c
}

// weigh keeps c at its size now that it grew, unless another chain of its
// app replaced it after it was evicted; a chain evicted meanwhile comes
// back, as the most recently used.
func (v *View) weigh(c *chain) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.chains.Get(c.app); ok && cur != c {
		return
	}
	v.chains.Add(c.app, c, c.size.Load())
}

// Current returns app's history up to its head in the bucket: one request
// for the head's attributes, and a listing only when releases landed since
// the chain was last extended.
func (v *View) current(ctx context.Context, app string) (*snapshot, error) {
	if err := store.ValidateApp(app); err != nil {
		return nil, err
	}
	head, err := v.src.Head(ctx, app)
	if errors.Is(err, store.ErrNotFound) {
		// A deleted head: what history there is, if any.
		return v.extend(ctx, app, 0)
	}
	if err != nil {
		return nil, err
	}
	return v.extend(ctx, app, head.Generation)
}

// latest returns the snapshot in memory, reading the bucket only when
// there is none.
func (v *View) latest(ctx context.Context, app string) (*snapshot, error) {
	if s := v.chainOf(app).snap.Load(); s != nil {
		return s, nil
	}
	return v.current(ctx, app)
}

// extend makes sure app's chain reaches generation head (0: whatever the
// history holds), listing the history once for every caller waiting.
func (v *View) extend(ctx context.Context, app string, head int64) (*snapshot, error) {
	c := v.chainOf(app)
	if s := c.snap.Load(); s != nil && (head == 0 || s.head().release.Generation >= head) {
		return s, nil
	}
	_, err, _ := v.builds.Do(app, func() (any, error) {
		if s := c.snap.Load(); s != nil && head != 0 && s.head().release.Generation >= head {
			return nil, nil
		}
		hist, err := v.src.History(context.WithoutCancel(ctx), app, store.HistoryOptions{})
		if err != nil {
			return nil, err
		}
		slices.Reverse(hist)
		v.checkHistory(c, hist)
		err = c.append(v.loc, hist)
		v.weigh(c)
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	s := c.snap.Load()
	if s == nil {
		return nil, fmt.Errorf("%s: %w: no release was ever published", app, store.ErrNotFound)
	}
	return s, nil
}

// checkHistory warns when a release the chain holds is no longer in the
// bucket (someone deleted a noncurrent version): the chain keeps it, so
// the SHAs Argo CD recorded stay fetchable from this replica, but a replica
// that builds the chain afresh will compute other SHAs from there on.
func (v *View) checkHistory(c *chain, oldestFirst []store.Release) {
	s := c.snap.Load()
	if s == nil {
		return
	}
	have := make(map[int64]bool, len(oldestFirst))
	for _, r := range oldestFirst {
		have[r.Generation] = true
	}
	for _, e := range s.entries {
		if !have[e.release.Generation] {
			v.log.Warn("a release in the git view is gone from the bucket: someone deleted a noncurrent version; commits after it differ on a replica that rebuilds the view",
				"app", c.app, "generation", e.release.Generation)
			return
		}
	}
}

// Commit returns the SHA of the commit of app's release generation.
func (v *View) Commit(ctx context.Context, app string, generation int64) (string, error) {
	s, err := v.latest(ctx, app)
	if err == nil {
		if i, ok := s.generation(generation); ok {
			return s.entries[i].commit.String(), nil
		}
	}
	if s, err = v.current(ctx, app); err != nil {
		return "", err
	}
	i, ok := s.generation(generation)
	if !ok {
		return "", fmt.Errorf("%s@%d: %w: no such release", app, generation, store.ErrNotFound)
	}
	return s.entries[i].commit.String(), nil
}

// Generation returns the release the commit sha of app's view is.
func (v *View) Generation(ctx context.Context, app, sha string) (store.Release, error) {
	h, ok := parseHash(sha)
	if !ok {
		return store.Release{}, fmt.Errorf("%q is not a commit SHA (40 hex digits)", sha)
	}
	s, err := v.latest(ctx, app)
	if err == nil {
		if i, ok := s.find(h); ok {
			return s.entries[i].release, nil
		}
	}
	if s, err = v.current(ctx, app); err != nil {
		return store.Release{}, err
	}
	if i, ok := s.find(h); ok {
		return s.entries[i].release, nil
	}
	return store.Release{}, fmt.Errorf("%s: %w: commit %s is not one of its releases", app, store.ErrNotFound, sha)
}

func parseHash(s string) (plumbing.Hash, bool) {
	if len(s) != 40 {
		return plumbing.ZeroHash, false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return plumbing.ZeroHash, false
		}
	}
	return plumbing.NewHash(s), true
}

// objects is an append-only object store, the storer go-git's pack encoder
// reads from.
type objects struct {
	mu sync.RWMutex
	m  map[plumbing.Hash]*plumbing.MemoryObject
}

func newObjects() *objects { return &objects{m: map[plumbing.Hash]*plumbing.MemoryObject{}} }

func (o *objects) add(objs ...*plumbing.MemoryObject) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, obj := range objs {
		o.m[obj.Hash()] = obj
	}
}

var errReadOnly = errors.New("gitview: the object store is read-only to go-git")

func (o *objects) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }

func (o *objects) SetEncodedObject(plumbing.EncodedObject) (plumbing.Hash, error) {
	return plumbing.ZeroHash, errReadOnly
}

func (o *objects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o.mu.RLock()
	obj, ok := o.m[h]
	o.mu.RUnlock()
	if !ok || (t != plumbing.AnyObject && obj.Type() != t) {
		return nil, plumbing.ErrObjectNotFound
	}
	return obj, nil
}

func (o *objects) IterEncodedObjects(plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	return nil, errReadOnly
}

func (o *objects) HasEncodedObject(h plumbing.Hash) error {
	_, err := o.EncodedObject(plumbing.AnyObject, h)
	return err
}

func (o *objects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	obj, err := o.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, err
	}
	return obj.Size(), nil
}

func (o *objects) AddAlternate(string) error { return errReadOnly }
