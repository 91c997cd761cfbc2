package deploy

import (
	"context"
	"time"
)

// Poll lists the bucket's heads every interval, starting now, and notifies
// every head the deployer hasn't seen: the safety net for notifications
// that were lost, and what catches up after a restart. It returns when ctx
// ends.
//
// The first poll only catches up: an app whose Applications Argo CD already
// compared at its head's commit is marked handled without a refresh, so a
// restarted bridge doesn't refresh every app it serves. It waits (a while)
// for the Application index, which says that.
func (d *Deployer) Poll(ctx context.Context, interval time.Duration) {
	if d.cfg.Connect != nil {
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		for !d.index.isReady() && wait.Err() == nil {
			select {
			case <-wait.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		cancel()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		d.PollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PollOnce lists the heads once and notifies them; it reports how many
// were new.
func (d *Deployer) PollOnce(ctx context.Context) int {
	heads, err := d.cfg.Releases.List(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.polls.WithLabelValues("error").Inc()
			d.log.Warn("poll: listing the bucket failed", "error", err)
		}
		return 0
	}
	d.metrics.polls.WithLabelValues("ok").Inc()
	d.mu.Lock()
	first := !d.baseline
	d.baseline = true
	d.mu.Unlock()
	now := d.now()
	n, current := 0, 0
	for _, h := range heads {
		if first && d.upToDate(ctx, h.App, h.Generation) {
			d.markHandled(h.App, h.Generation, h.Time)
			current++
			continue
		}
		if d.Notify(Event{App: h.App, Generation: h.Generation, Source: SourcePoll, Time: h.Time, Received: now}) {
			n++
		}
	}
	if first && current > 0 {
		d.log.Info("first poll: apps Argo CD already runs at their head are not refreshed", "apps", current)
	}
	if n > 0 {
		d.log.Info("poll found new releases", "apps", n)
	}
	return n
}

// upToDate reports whether every Application of app was compared by Argo
// CD at the commit of generation gen.
func (d *Deployer) upToDate(ctx context.Context, app string, gen int64) bool {
	if !d.index.isReady() || d.cfg.Revisions == nil {
		return false
	}
	apps := d.index.forApp(app)
	if len(apps) == 0 {
		return false
	}
	sha, err := d.cfg.Revisions.Commit(ctx, app, gen)
	if err != nil {
		return false
	}
	for _, a := range apps {
		if revisionOf(a) != sha {
			return false
		}
	}
	return true
}

// markHandled records gen as app's newest generation, handled.
func (d *Deployer) markHandled(app string, gen int64, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.apps[app]
	if st == nil {
		st = &appState{}
		d.apps[app] = st
	}
	if gen > st.newest {
		st.newest, st.newestAt = gen, at
	}
	if gen > st.handled {
		st.handled, st.handledAt = gen, d.now()
	}
}
