package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Results is everything one run measured.
type Results struct {
	Config     Config
	Wall       time.Duration
	CPUs       int
	GoVersion  string
	GitVersion string
	// Contenders are the ids run, in report order.
	Contenders  []string
	History     []Row
	Concurrency []Row
	// Size holds one row per store: bucketops, and git (all three git
	// workflows push one commit per release, so they store the same).
	Size []SizeRow
}

// Row is one workload's figures for every contender.
type Row struct {
	History int // prior releases
	Writers int
	SameApp bool
	By      map[string]*Sample
}

// SizeRow is the repository-size workload for one store.
type SizeRow struct {
	Store    string // "bucketops" or "git"
	Releases int
	AppBytes int
	Sample   *Sample
}

// Sample is what one contender did in one workload.
type Sample struct {
	Latencies []time.Duration
	Published int
	Dropped   int
	Failed    int
	Retries   int
	Wall      time.Duration
	// Requests counts the HTTP requests of the measured publishes, for
	// contenders that count them (bucketops); -1 otherwise.
	Requests int64
	// Plain and Packed are the store's bytes after the workload (size
	// workload only).
	Plain, Packed int64
	// Check is empty when the final state is the last intended release of
	// every app and nothing was lost; otherwise it says what was wrong.
	Check string
}

// Throughput is publishes (published or dropped as stale) per second.
func (s *Sample) Throughput() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Published+s.Dropped) / s.Wall.Seconds()
}

// RequestsPerPublish is -1 when not counted.
func (s *Sample) RequestsPerPublish() float64 {
	n := s.Published + s.Dropped
	if s.Requests < 0 || n == 0 {
		return -1
	}
	return float64(s.Requests) / float64(n)
}

// AllChecksPassed reports whether every workload's check passed.
func (r *Results) AllChecksPassed() bool {
	for _, rows := range [][]Row{r.History, r.Concurrency} {
		for _, row := range rows {
			for _, s := range row.By {
				if s.Check != "" {
					return false
				}
			}
		}
	}
	for _, row := range r.Size {
		if row.Sample.Check != "" {
			return false
		}
	}
	return true
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of d,
// or 0 for no samples.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func newContender(id string, cfg Config) contender {
	switch id {
	case idGitClone:
		return gitContender{mode: gitClone, depth: cfg.CloneDepth}
	case idGitQueue:
		return gitContender{mode: gitQueue, depth: cfg.CloneDepth}
	case idGitWorkdir:
		return gitContender{mode: gitWorkdir}
	}
	return bucketContender{}
}

// measure runs every workload for every contender. Within a workload the
// contenders run one after the other, so that they share the machine's
// noise of the moment rather than of different minutes.
func measure(ctx context.Context, cfg Config, progress func(string, ...any)) (*Results, error) {
	start := time.Now()
	res := &Results{Config: cfg, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	for _, id := range contenderIDs {
		if slices.Contains(cfg.Contenders, id) {
			res.Contenders = append(res.Contenders, id)
		}
	}
	if len(res.gitIDs()) > 0 {
		out, err := exec.CommandContext(ctx, "git", "--version").Output()
		if err != nil {
			return nil, fmt.Errorf("the git contenders need the git command line (or run -contenders bucketops): %w", err)
		}
		res.GitVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "git version ")
	}

	const historyApp = "prod/payments"
	for _, h := range cfg.History {
		row := Row{History: h, Writers: 1, By: map[string]*Sample{}}
		for _, id := range res.Contenders {
			s, err := runWorkload(ctx, newContender(id, cfg), workload{
				apps: []string{historyApp}, history: h, writers: 1, releases: cfg.HistoryReleases, size: cfg.ManifestBytes,
			})
			if err != nil {
				return nil, fmt.Errorf("history %d, %s: %w", h, id, err)
			}
			row.By[id] = s
			progress("history %6d  %-12s p50 %9s  p99 %9s%s", h, id, fmtDur(percentile(s.Latencies, 50)), fmtDur(percentile(s.Latencies, 99)), checkNote(s))
		}
		res.History = append(res.History, row)
	}

	type level struct {
		writers int
		same    bool
	}
	var levels []level
	for _, w := range cfg.Writers {
		levels = append(levels, level{w, false})
	}
	if cfg.SameApp > 0 {
		levels = append(levels, level{cfg.SameApp, true})
	}
	for _, l := range levels {
		apps := make([]string, l.writers)
		for i := range apps {
			apps[i] = fmt.Sprintf("prod/app-%02d", i+1)
		}
		if l.same {
			apps = apps[:1]
		}
		row := Row{History: cfg.ConcurrencyHistory, Writers: l.writers, SameApp: l.same, By: map[string]*Sample{}}
		for _, id := range res.Contenders {
			s, err := runWorkload(ctx, newContender(id, cfg), workload{
				apps: apps, history: cfg.ConcurrencyHistory, writers: l.writers, releases: cfg.Releases, size: cfg.ManifestBytes,
			})
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", rowLabel(row), id, err)
			}
			row.By[id] = s
			progress("%-22s %-12s %8.1f publishes/s  p50 %9s  p99 %9s  retries %4d%s", rowLabel(row), id, s.Throughput(),
				fmtDur(percentile(s.Latencies, 50)), fmtDur(percentile(s.Latencies, 99)), s.Retries, checkNote(s))
		}
		res.Concurrency = append(res.Concurrency, row)
	}

	if cfg.SizeReleases > 0 {
		stores := []struct{ name, id string }{{"bucketops", idBucketops}, {"git", idGitWorkdir}}
		for _, st := range stores {
			if !slices.Contains(res.Contenders, st.id) && !(st.name == "git" && hasGit(res.Contenders)) {
				continue
			}
			s, err := runWorkload(ctx, newContender(st.id, cfg), workload{
				apps: []string{"prod/big"}, writers: 1, releases: cfg.SizeReleases, size: cfg.AppBytes, measureSize: true,
			})
			if err != nil {
				return nil, fmt.Errorf("size, %s: %w", st.name, err)
			}
			res.Size = append(res.Size, SizeRow{Store: st.name, Releases: cfg.SizeReleases, AppBytes: cfg.AppBytes, Sample: s})
			progress("size %-9s %d releases of %s: %s as written, %s packed%s", st.name, cfg.SizeReleases, fmtBytes(int64(cfg.AppBytes)),
				fmtBytes(s.Plain), fmtBytes(s.Packed), checkNote(s))
		}
	}
	res.Wall = time.Since(start)
	return res, nil
}

func rowLabel(r Row) string {
	if r.SameApp {
		return fmt.Sprintf("%d writers, one app", r.Writers)
	}
	if r.Writers == 1 {
		return "1 writer"
	}
	return fmt.Sprintf("%d writers, %d apps", r.Writers, r.Writers)
}

func hasGit(ids []string) bool {
	return slices.ContainsFunc(ids, func(id string) bool { return id != idBucketops })
}

func checkNote(s *Sample) string {
	if s.Check != "" {
		return "  CHECK FAILED: " + s.Check
	}
	return ""
}

// workload is one measurement: writers publish releases each, writer i to
// apps[i%len(apps)], on a store holding history prior releases.
type workload struct {
	apps        []string
	history     int
	writers     int
	releases    int
	size        int
	measureSize bool
	// tamper, for tests, runs after the publishes and before the check.
	tamper func(context.Context, target) error
}

// runWorkload measures one workload on a fresh store of c and checks its
// final state. Each release's sequence is taken from a per-app counter when
// its publish starts, as a CI build number is: concurrent writers of one
// app may reach the store out of order, and the intended final state is
// the release with the highest sequence.
func runWorkload(ctx context.Context, c contender, wl workload) (*Sample, error) {
	tgt, err := c.Open(ctx, wl.apps, wl.history, wl.size)
	if err != nil {
		return nil, fmt.Errorf("set up: %w", err)
	}
	defer tgt.Close()
	priorCount := map[string]int{}
	counters := map[string]*atomic.Uint64{}
	for _, app := range wl.apps {
		counters[app] = new(atomic.Uint64)
	}
	for _, p := range priors(wl.apps, wl.history) {
		priorCount[p.App]++
		counters[p.App].Store(p.Seq)
	}
	writersOf := map[string]int{}
	writers := make([]writer, wl.writers)
	for i := range writers {
		if writers[i], err = tgt.Writer(ctx); err != nil {
			return nil, fmt.Errorf("set up writer %d: %w", i, err)
		}
		defer writers[i].Close()
		writersOf[wl.apps[i%len(wl.apps)]]++
	}

	s := &Sample{Requests: -1}
	var (
		mu        sync.Mutex
		published = map[string]int{}
		dropped   = map[string]int{}
		errs      []error
	)
	rc, counted := tgt.(requestCounter)
	var before, rejectedBefore int64
	if counted {
		before, rejectedBefore = rc.Requests(), rc.Rejections()
	}
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for i, w := range writers {
		app := wl.apps[i%len(wl.apps)]
		wg.Go(func() {
			<-startGate
			for range wl.releases {
				if ctx.Err() != nil {
					return
				}
				seq := counters[app].Add(1)
				data := manifest(app, seq, wl.size)
				t0 := time.Now()
				out, err := w.Publish(ctx, app, seq, data)
				d := time.Since(t0)
				mu.Lock()
				s.Retries += out.Retries
				switch {
				case err != nil:
					s.Failed++
					errs = append(errs, fmt.Errorf("%s sequence %d: %w", app, seq, err))
				case out.Dropped:
					s.Dropped++
					dropped[app]++
					s.Latencies = append(s.Latencies, d)
				default:
					s.Published++
					published[app]++
					s.Latencies = append(s.Latencies, d)
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	close(startGate)
	wg.Wait()
	s.Wall = time.Since(start)
	if counted {
		s.Requests = rc.Requests() - before
		s.Retries = int(rc.Rejections() - rejectedBefore)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if wl.tamper != nil {
		if err := wl.tamper(ctx, tgt); err != nil {
			return nil, fmt.Errorf("tamper: %w", err)
		}
	}

	var problems []string
	if len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("%d publishes failed, the first: %v", len(errs), errs[0]))
	}
	for _, app := range wl.apps {
		want := counters[app].Load()
		data, n, err := tgt.State(ctx, app)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", app, err))
			continue
		}
		if !bytes.Equal(data, manifest(app, want, wl.size)) {
			got, _ := manifestSeq(data)
			problems = append(problems, fmt.Sprintf("%s holds sequence %d, not the last intended %d", app, got, want))
		}
		if wantN := priorCount[app] + published[app]; n != wantN {
			problems = append(problems, fmt.Sprintf("%s has %d releases, not %d (%d before, %d published)", app, n, wantN, priorCount[app], published[app]))
		}
		if writersOf[app] == 1 && dropped[app] > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d releases dropped as stale with no other writer", app, dropped[app]))
		}
	}
	if wl.measureSize {
		if s.Plain, s.Packed, err = tgt.Size(ctx); err != nil {
			return nil, fmt.Errorf("size: %w", err)
		}
	}
	s.Check = strings.Join(problems, "; ")
	return s, nil
}
