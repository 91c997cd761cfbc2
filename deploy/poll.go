package deploy

import (
	"context"
	"time"
)

// Poll lists the bucket's heads every interval, starting now, and notifies
// every head the deployer hasn't seen: the safety net for notifications
// that were lost, and what catches up after a restart. It returns when ctx
// ends.
func (d *Deployer) Poll(ctx context.Context, interval time.Duration) {
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
	n := 0
	for _, h := range heads {
		if d.Notify(Event{App: h.App, Generation: h.Generation, Source: SourcePoll, Time: h.Time}) {
			n++
		}
	}
	if n > 0 {
		d.log.Info("poll found new releases", "apps", n)
	}
	return n
}
