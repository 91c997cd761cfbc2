//go:build faults

package faults

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketops/bucketops/store"
)

// Scenario 6: 50 concurrent writers publish for 60 s (BUCKETOPS_LOAD_SECONDS)
// to the containerised GCS emulator, two writers per app racing with
// interleaved sequences. The figures are reported, not asserted; what is
// asserted is that nothing was lost and nothing stale landed.
func testLoad(t *testing.T) {
	const writers, apps = 50, 25
	duration := 60 * time.Second
	if v := os.Getenv("BUCKETOPS_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BUCKETOPS_LOAD_SECONDS=%q: want a positive number of seconds", v)
		}
		duration = time.Duration(n) * time.Second
	}
	c := newCluster(t, options{})
	names := appNames(apps)
	seqs := make([]atomic.Uint64, apps) // the next sequence of each app

	type outcome struct {
		app        int
		seq        uint64
		generation int64
		latency    time.Duration
		attempts   int
		stale      bool
	}
	var mu sync.Mutex
	var outcomes []outcome
	var failures []error
	deadline := time.Now().Add(duration)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		app := w % apps
		wg.Go(func() {
			for time.Now().Before(deadline) {
				seq := seqs[app].Add(1)
				t0 := time.Now()
				res, err := c.publish(t.Context(), names[app], seq)
				o := outcome{app: app, seq: seq, generation: res.Generation, latency: time.Since(t0), attempts: res.Attempts}
				mu.Lock()
				switch {
				case err == nil:
					outcomes = append(outcomes, o)
				case errors.Is(err, store.ErrStale):
					// The other writer of the app got a higher
					// sequence in first: refused, as it must be.
					o.stale = true
					outcomes = append(outcomes, o)
				default:
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range failures {
		t.Errorf("publish failed: %v", err)
	}

	// Nothing lost, nothing stale: every accepted publish is a generation
	// of its app with its sequence, the history's sequences rise with the
	// generations, and the head is the highest sequence accepted.
	accepted := map[int]map[int64]uint64{}
	var latencies []time.Duration
	var published, stale, retries int
	for _, o := range outcomes {
		latencies = append(latencies, o.latency)
		if o.stale {
			stale++
			continue
		}
		published++
		retries += o.attempts - 1
		if accepted[o.app] == nil {
			accepted[o.app] = map[int64]uint64{}
		}
		accepted[o.app][o.generation] = o.seq
	}
	var lost, staleLanded int
	for i, app := range names {
		hist, err := c.store.History(t.Context(), app, store.HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inBucket := map[int64]uint64{}
		var prev uint64 = 1<<64 - 1
		for _, r := range hist { // newest first
			inBucket[r.Generation] = r.Sequence
			if seq, ok := accepted[i][r.Generation]; !ok || seq != r.Sequence {
				t.Errorf("%s: generation %d (sequence %d) is no accepted publish", app, r.Generation, r.Sequence)
			}
			if r.Sequence >= prev {
				staleLanded++
				t.Errorf("%s: generation %d has sequence %d, not below the next generation's %d: a stale write landed", app, r.Generation, r.Sequence, prev)
			}
			prev = r.Sequence
		}
		for gen, seq := range accepted[i] {
			if got, ok := inBucket[gen]; !ok || got != seq {
				lost++
				t.Errorf("%s: the accepted publish of sequence %d as generation %d isn't in the bucket", app, seq, gen)
			}
		}
		var highest uint64
		for _, seq := range accepted[i] {
			highest = max(highest, seq)
		}
		if len(hist) > 0 && hist[0].Sequence != highest {
			t.Errorf("%s: head has sequence %d, the highest accepted is %d", app, hist[0].Sequence, highest)
		}
	}

	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	t.Logf("load: %d writers on %d apps for %s, %d cores, %s", writers, apps, elapsed.Round(time.Second), runtime.NumCPU(), time.Now().Format("2006-01-02"))
	t.Logf("| releases/s | publish p50 | publish p99 | published | refused stale | retries (412 and 5xx) | lost | stale landed |")
	t.Logf("|---:|---:|---:|---:|---:|---:|---:|---:|")
	t.Logf("| %.0f | %s | %s | %d | %d | %d | %d | %d |",
		float64(published)/elapsed.Seconds(), ms(pct(0.50)), ms(pct(0.99)), published, stale, retries, lost, staleLanded)
	if published == 0 {
		t.Fatal("no publish succeeded")
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
