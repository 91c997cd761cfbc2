package deploy

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The queue: events in, per-app state, coalescing, retries with back-off.

// appState is what the deployer knows of one app.
type appState struct {
	newest    int64     // newest generation any event named
	newestAt  time.Time // when that generation was written
	received  time.Time // when the event naming it arrived
	handled   int64     // newest generation refreshed in every Application
	handledAt time.Time
	queued    bool // in the queue, or waiting for its coalesce window or back-off
	busy      bool // a worker has it
	attempts  int  // failed attempts for newest, for back-off
	lastError string
	// failed is Argo CD's refusal for good of a call for generation
	// failedGen: the generation's status is failed, and it is not retried.
	failed    string
	failedGen int64
	// compareErr is the ComparisonError Argo CD answered the refresh for
	// generation compareGen with: its times have one-second precision, so
	// this is how a failure in the second of the release is told from an
	// older one.
	compareErr string
	compareGen int64
	// orphan: no Application deployed the app when newest was handled.
	// The first Application for it that the watch stream brings requeues
	// it (adopt), rather than the release waiting for a newer one or the
	// next poll.
	orphan bool
}

// Notify takes an event. It never blocks on Argo CD: it records the
// generation and, when it is new, schedules the app's refresh. It reports
// whether the event was new; a duplicate, or a generation older than one
// already seen, is dropped.
func (d *Deployer) Notify(ev Event) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.apps[ev.App]
	if st == nil {
		st = &appState{}
		d.apps[ev.App] = st
	}
	if ev.Generation <= st.newest {
		d.metrics.events.WithLabelValues(ev.Source, "duplicate").Inc()
		return false
	}
	d.metrics.events.WithLabelValues(ev.Source, "accepted").Inc()
	st.newest, st.newestAt, st.received = ev.Generation, ev.Time, ev.Received
	if st.received.IsZero() {
		st.received = d.now()
	}
	st.attempts = 0
	if !st.queued && !st.busy {
		st.queued = true
		d.after(d.cfg.Coalesce, ev.App)
	}
	if d.cfg.Observe != nil {
		d.cfg.Observe(ev.App)
	}
	return true
}

// Ignored counts an event that was well-formed but not for us, or that
// couldn't be read (outcome "ignored" or "malformed"), or whose sender
// wasn't authenticated ("rejected").
func (d *Deployer) Ignored(source, outcome string) {
	d.metrics.events.WithLabelValues(source, outcome).Inc()
}

// adopt requeues app if its newest release found no Application to
// deploy it: the watch stream has just brought one. The handle in
// progress, if any, checks the index again when it ends.
func (d *Deployer) adopt(app string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.adoptLocked(app)
}

func (d *Deployer) adoptLocked(app string) {
	st := d.apps[app]
	if st == nil || !st.orphan || st.queued || st.busy {
		return
	}
	st.orphan = false
	st.queued = true
	d.log.Info("an Application for the app appeared; deploying its release", "app", app, "generation", st.newest)
	d.after(0, app)
}

// after puts app on the queue once delay has passed.
func (d *Deployer) after(delay time.Duration, app string) {
	time.AfterFunc(delay, func() {
		d.mu.Lock()
		d.queue = append(d.queue, app)
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	})
}

// work takes apps off the queue and refreshes them.
func (d *Deployer) work(ctx context.Context) {
	for {
		app, ok := d.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
				continue
			}
		}
		d.handle(ctx, app)
		if ctx.Err() != nil {
			return
		}
	}
}

// next pops an app to work on.
func (d *Deployer) next() (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.queue) > 0 {
		app := d.queue[0]
		d.queue = d.queue[1:]
		st := d.apps[app]
		if st.busy || !st.queued {
			continue
		}
		st.queued, st.busy = false, true
		if len(d.queue) > 0 {
			// Let another worker in.
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
		return app, true
	}
	return "", false
}

// handle refreshes (and maybe syncs) app's Applications for its newest
// generation, then schedules what's left: a newer generation that arrived
// meanwhile, or a retry.
func (d *Deployer) handle(ctx context.Context, app string) {
	d.mu.Lock()
	st := d.apps[app]
	gen, at, received := st.newest, st.newestAt, st.received
	d.mu.Unlock()

	err := d.deploy(ctx, app, gen, at, received)

	d.mu.Lock()
	defer d.mu.Unlock()
	st.busy = false
	st.orphan = errors.Is(err, errNoApplication)
	if st.orphan {
		err = nil
		// An Application the watch brought while deploy looked found
		// nothing to adopt (busy): adopt it now.
		if len(d.index.forApp(app)) > 0 {
			d.adoptLocked(app)
		}
	}
	if err == nil {
		if gen > st.handled {
			st.handled, st.handledAt = gen, d.now()
		}
		st.lastError = ""
		if st.newest > st.handled {
			st.queued = true
			st.attempts = 0
			d.after(d.cfg.Coalesce, app)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	st.lastError = err.Error()
	if permanent(err) {
		// Retrying can't help: the token may not, the Application is gone,
		// or Argo CD calls the request invalid. The generation failed; a
		// newer one is tried afresh.
		st.failed, st.failedGen = "Argo CD refused the bridge's call: "+err.Error(), gen
		d.log.Error("argo cd refused a call for good; not retrying this generation", "app", app, "generation", gen, "error", err)
		if st.newest > gen {
			st.queued, st.attempts = true, 0
			d.after(d.cfg.Coalesce, app)
		}
		return
	}
	if st.newest > gen {
		st.attempts = 0
	}
	st.attempts++
	delay := d.backoff(st.attempts)
	d.log.Warn("argo cd call failed; will retry", "app", app, "generation", st.newest, "attempt", st.attempts, "retry_in", delay, "error", err)
	st.queued = true
	d.after(delay, app)
}

// permanent reports whether Argo CD refused a call for good: every error
// joined in err is PermissionDenied, NotFound or InvalidArgument.
func permanent(err error) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		switch status.Code(unwrapGRPC(e)) {
		case codes.PermissionDenied, codes.NotFound, codes.InvalidArgument:
		default:
			return false
		}
	}
	return len(errs) > 0
}

// unwrapGRPC finds the gRPC status error inside err.
func unwrapGRPC(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := status.FromError(e); ok {
			return e
		}
	}
	return err
}

// failure returns why generation of app failed for good, if it did: a
// refusal of Argo CD this bridge met. (Another replica may have met none.)
func (d *Deployer) failure(app string, generation int64) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil && st.failed != "" && st.failedGen >= generation {
		return st.failed
	}
	return ""
}

// recordComparison keeps what the refresh for gen showed of manifest
// generation: an error, or none.
func (d *Deployer) recordComparison(app string, gen int64, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil && gen >= st.compareGen {
		st.compareErr, st.compareGen = msg, gen
	}
}

// comparisonFailure returns the ComparisonError the refresh for generation
// gen (or a newer one) of app met, if this bridge made it.
func (d *Deployer) comparisonFailure(app string, gen int64) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil && st.compareErr != "" && st.compareGen >= gen {
		return st.compareErr
	}
	return ""
}

// backoff returns the delay before the attempt after n failures: doubling
// from MinBackoff up to MaxBackoff, with jitter.
func (d *Deployer) backoff(n int) time.Duration {
	b := d.cfg.MinBackoff
	for i := 1; i < n && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.cfg.MaxBackoff)
	return b/2 + rand.N(b/2+1)
}

// pendingApps counts apps with a generation not yet handled.
func (d *Deployer) pendingApps() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, st := range d.apps {
		if st.newest > st.handled {
			n++
		}
	}
	return float64(n)
}

// Handled returns the newest generation of app refreshed in every
// Application that deploys it, and when.
func (d *Deployer) Handled(app string) (int64, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil {
		return st.handled, st.handledAt
	}
	return 0, time.Time{}
}
