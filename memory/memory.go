// Package memory owns the bridge's render memory: the one budget that
// every request which holds a whole release in memory is admitted
// against — a render for Argo CD (webhook), a release page or a diff of
// two releases (ui). The git view never reads a release's manifests (its
// commits hold release.json, a few hundred bytes) and bounds its requests
// by their own caps (gitview).
//
// The contract: work admitted by Budget.Acquire for a release of n bytes
// peaks at no more than Cost(n) of heap above what the process held
// before it, measured as BenchmarkPeakHeap measures it (docs/benchmarks.md),
// so admitted work together stays within the budget. Work larger than the
// whole budget is admitted alone, with the whole budget, and may then
// exceed it: the bridge's default budget under the base Deployment's
// limit holds a release of store.MaxReleaseBytes, and the bridge warns at
// start when --render-memory doesn't.
package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
)

// PerByte is how many bytes of heap admitted work is counted for per byte
// of release, from BenchmarkPeakHeap (docs/benchmarks.md), which measures
// the heap a request adds, dead objects not yet freed included, under the
// Deployment's memory limit, for the costliest shape per byte. One request
// alone: 12 times its release for a render for Argo CD (118 MiB for the
// largest release), 12 for a release page, 15 for a diff (per byte of
// both releases). Ten at once, admitted one after another, overlap the
// garbage of the one before: up to 24 times for diffs. 25 covers that.
const PerByte = 25

// MinCost is what the smallest release is counted for: its buffers, the
// request's own allocations, the page's template.
const MinCost = 1 << 20

// Cost is the heap admitted work over a release of size bytes is counted
// for (size < 0 is taken as 0).
func Cost(size int64) int64 {
	return max(max(size, 0)*PerByte, MinCost)
}

// ErrBusy is returned when the budget stayed taken for the whole wait.
var ErrBusy = errors.New("render memory busy")

// Budget admits work by its Cost. A nil Budget admits everything at once.
type Budget struct {
	sem   *semaphore.Weighted
	total int64
}

// NewBudget returns a budget of total bytes; total <= 0 means no bound
// (nil).
func NewBudget(total int64) *Budget {
	if total <= 0 {
		return nil
	}
	return &Budget{sem: semaphore.NewWeighted(total), total: total}
}

// Total is the budget's size in bytes; 0 for no bound.
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total
}

// Acquire waits until work over releases of the given sizes (one for a
// render or a release page, two for a diff) fits beside what is already
// admitted, for at most wait (and ctx), and returns the function that
// gives the memory back. It fails with ErrBusy when the wait ran out.
func (b *Budget) Acquire(ctx context.Context, wait time.Duration, sizes ...int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	var weight int64
	for _, s := range sizes {
		weight += Cost(s)
	}
	weight = min(weight, b.total)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := b.sem.Acquire(ctx, weight); err != nil {
		return nil, fmt.Errorf("%w: waited %s for %d MiB of the bridge's --render-memory (%d MiB), which other requests hold", ErrBusy, wait.Round(time.Millisecond), (weight+1<<20-1)>>20, b.total>>20)
	}
	return func() { b.sem.Release(weight) }, nil
}
