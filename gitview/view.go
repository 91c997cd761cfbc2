package gitview

import (
	"container/list"
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
	// MaxApps bounds the apps whose commits are kept in memory (default
	// 1,000; about 1 KiB per release); an evicted app is built again from
	// its history when next asked for.
	MaxApps int
}

// View serves each app's releases as a git repository.
type View struct {
	src     Source
	loc     store.Location
	log     *slog.Logger
	maxApps int

	mu     sync.Mutex
	chains map[string]*list.Element // of *chain
	lru    *list.List
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
	if cfg.MaxApps <= 0 {
		cfg.MaxApps = 1000
	}
	return &View{src: cfg.Source, loc: cfg.Location, log: cfg.Logger, maxApps: cfg.MaxApps,
		chains: map[string]*list.Element{}, lru: list.New()}, nil
}

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
}

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
	if el, ok := v.chains[app]; ok {
		v.lru.MoveToFront(el)
		return el.Value.(*chain)
	}
	c := &chain{app: app, objects: newObjects(), position: map[plumbing.Hash]int{}}
	v.chains[app] = v.lru.PushFront(c)
	for v.lru.Len() > v.maxApps {
		old := v.lru.Back()
		v.lru.Remove(old)
		delete(v.chains, old.Value.(*chain).app)
	}
	return c
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
		return nil, c.append(v.loc, hist)
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
