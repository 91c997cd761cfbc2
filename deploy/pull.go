package deploy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/bucketops/bucketops/store"
)

// maxPullBackoff bounds the wait before resubscribing.
const maxPullBackoff = 10 * time.Second

// Receive takes the bucket's notifications from a Pub/Sub pull
// subscription until ctx ends. Every message is acked once handed to
// Notify, which doesn't block: a message for something else, or one that
// can't be read, is acked too (and counted), since redelivering it can't
// help. Receive reconnects after errors with back-off; a gap while it does
// is what polling covers.
func (d *Deployer) Receive(ctx context.Context, sub *pubsub.Subscriber, loc store.Location) {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		var received atomic.Bool
		err := sub.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			received.Store(true)
			d.Take(loc, SourcePull, m.Attributes, m.Data, time.Now())
			m.Ack()
		})
		if ctx.Err() != nil {
			return
		}
		if received.Load() {
			// It worked before it stopped: this outage starts the
			// back-off afresh, rather than where the last one left it.
			attempt = 1
		}
		// Reconnecting costs one stream: the delay stays short, so a
		// Pub/Sub outage leaves a gap of seconds after it, not minutes.
		delay := min(d.backoff(attempt), maxPullBackoff)
		d.log.Warn("pubsub subscription stopped; reconnecting", "subscription", sub.String(), "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// Take parses a storage notification and notifies the deployer of it. It
// returns the event and whether it was new, or the parse error (ErrIgnored
// or ErrMalformed), already counted and logged.
func (d *Deployer) Take(loc store.Location, source string, attrs map[string]string, data []byte, received time.Time) (Event, bool, error) {
	ev, err := ParseNotification(loc, attrs, data, received)
	switch {
	case errors.Is(err, ErrIgnored):
		d.Ignored(source, "ignored")
		d.log.Debug("notification ignored", "source", source, "reason", err)
		return Event{}, false, err
	case err != nil:
		d.Ignored(source, "malformed")
		d.log.Warn("malformed notification dropped", "source", source, "error", err)
		return Event{}, false, err
	}
	ev.Source = source
	return ev, d.Notify(ev), nil
}
