package deploy

import "sync"

// inflight keeps the order of the syncs the bridge asked Argo CD for that
// the controller hasn't started yet, so that a sync is judged stuck only
// once it is first in line.
//
// Why: Argo CD's controller starts operations a few at a time
// (--operation-processors). When a release of 200 apps asks for 200 syncs
// at once, the last of them start minutes later, and a sync not started
// 10 s after its request is simply waiting its turn; refreshing it (the
// remedy for a sync the controller passed over, argo-cd#18500) would cost
// an annotation set and cleared, an ApplicationSet render each time, a
// comparison racing the sync's own and, measured in the fleet race, a
// second generation of the same release now and then. A sync with none of
// the bridge's earlier syncs still waiting ahead of it is one the
// controller could have started: NudgeAfter counts from then.
type inflight struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]struct{}
}

// add records a sync just requested and returns its place in line.
func (q *inflight) add() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiting == nil {
		q.waiting = map[uint64]struct{}{}
	}
	q.next++
	q.waiting[q.next] = struct{}{}
	return q.next
}

// done removes a sync that started, or that the bridge stopped following.
func (q *inflight) done(id uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.waiting, id)
}

// first reports whether no sync requested before id is still waiting.
func (q *inflight) first(id uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for other := range q.waiting {
		if other < id {
			return false
		}
	}
	return true
}
