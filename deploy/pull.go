package deploy

import (
	"context"
	"errors"
	"fmt"
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
// help; one the bucket couldn't be asked about is nacked, to come again. Receive reconnects after errors with back-off; a gap while it does
// is what polling covers.
func (d *Deployer) Receive(ctx context.Context, sub *pubsub.Subscriber, loc store.Location) {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		var received atomic.Bool
		err := sub.Receive(ctx, func(mctx context.Context, m *pubsub.Message) {
			received.Store(true)
			if _, _, err := d.Take(mctx, loc, SourcePull, m.Attributes, m.Data, time.Now()); errors.Is(err, ErrUnverified) {
				m.Nack()
				return
			}
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

// ErrUnverified marks a notification the bucket couldn't be asked about:
// it should be delivered again.
var ErrUnverified = errors.New("notification not checked against the bucket")

// headTimeout bounds the head read that checks a notification.
const headTimeout = 10 * time.Second

// Take parses a storage notification, checks it against the bucket, and
// notifies the deployer of the app's real head. It returns the event and
// whether it was new, or why it was dropped: ErrIgnored or ErrMalformed
// (already counted and logged; don't redeliver), or ErrUnverified (the
// bucket didn't answer; redeliver).
//
// A notification's generation is never trusted: the deployer would drop
// every later event at or below it, so one forged message naming a huge
// generation would freeze its app until a restart. The head's attributes
// (one request) say what really is there; a notification naming a
// generation newer than the head is dropped as forged.
func (d *Deployer) Take(ctx context.Context, loc store.Location, source string, attrs map[string]string, data []byte, received time.Time) (Event, bool, error) {
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
	hctx, cancel := context.WithTimeout(ctx, headTimeout)
	head, err := d.cfg.Releases.Head(hctx, ev.App)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.Ignored(source, "ignored")
		d.log.Debug("notification for an object that has no live generation", "source", source, "app", ev.App, "generation", ev.Generation)
		return Event{}, false, fmt.Errorf("%w: %s has no live release", ErrIgnored, ev.App)
	case err != nil:
		d.Ignored(source, "unverified")
		d.log.Warn("can't check a notification against the bucket; it will be delivered again", "source", source, "app", ev.App, "generation", ev.Generation, "error", err)
		return Event{}, false, fmt.Errorf("%w: %w", ErrUnverified, err)
	case ev.Generation > head.Generation:
		d.Ignored(source, "forged")
		d.log.Warn("notification names a generation newer than the bucket's head: forged or corrupt, dropped", "source", source, "app", ev.App, "generation", ev.Generation, "head", head.Generation)
		return Event{}, false, fmt.Errorf("%w: %s has no generation %d; its head is %d", ErrMalformed, ev.App, ev.Generation, head.Generation)
	}
	ev.Generation, ev.Time, ev.Source = head.Generation, head.Time, source
	return ev, d.Notify(ev), nil
}
