package ui

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/bucketops/bucketops/store"
)

// newestPublishes keeps the limit newest releases it is given, by publish
// time, in a min-heap, and counts all of them: what the activity page
// holds is bounded by its answer, not by the window.
type newestPublishes struct {
	limit int
	seen  int
	rs    []store.Release
}

// newer orders releases by publish time, ties by app and generation, so
// an answer is the same however the histories were read.
func newer(a, b store.Release) int {
	return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.App, b.App), cmp.Compare(a.Generation, b.Generation))
}

func (n *newestPublishes) Len() int           { return len(n.rs) }
func (n *newestPublishes) Less(i, j int) bool { return newer(n.rs[i], n.rs[j]) < 0 }
func (n *newestPublishes) Swap(i, j int)      { n.rs[i], n.rs[j] = n.rs[j], n.rs[i] }
func (n *newestPublishes) Push(x any)         { n.rs = append(n.rs, x.(store.Release)) }
func (n *newestPublishes) Pop() any {
	last := n.rs[len(n.rs)-1]
	n.rs = n.rs[:len(n.rs)-1]
	return last
}

func (n *newestPublishes) add(r store.Release) {
	n.seen++
	switch {
	case len(n.rs) < n.limit:
		heap.Push(n, r)
	case newer(r, n.rs[0]) > 0:
		n.rs[0] = r
		heap.Fix(n, 0)
	}
}

// admits reports whether add would keep r, as things stand.
func (n *newestPublishes) admits(r store.Release) bool {
	return len(n.rs) < n.limit || newer(r, n.rs[0]) > 0
}

// full reports whether n holds limit releases, and then the oldest of
// them: the one the next release it admits replaces.
func (n *newestPublishes) full() (store.Release, bool) {
	if len(n.rs) < n.limit || len(n.rs) == 0 {
		return store.Release{}, false
	}
	return n.rs[0], true
}

// sorted returns the releases kept, newest first.
func (n *newestPublishes) sorted() []store.Release {
	slices.SortFunc(n.rs, func(a, b store.Release) int { return newer(b, a) })
	return n.rs
}
