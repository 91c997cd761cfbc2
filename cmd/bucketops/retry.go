package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/bucketops/bucketops/store"
)

// retryFlags are push's --retries and --retry-delay.
type retryFlags struct {
	retries int
	delay   time.Duration
}

// healable says whether the same command again may succeed: GCS or the
// bridge overloaded or failing (429, 5xx but 501, which is a bridge
// without Argo CD), the network (refused, reset, DNS), or an attempt's
// --timeout. A wrong token or credentials, a usage error, invalid input,
// stale, conflict, not found, a digest mismatch or a failed deploy won't
// heal and are never retried.
func healable(err error) bool {
	var b *bridgeError
	if errors.As(err, &b) {
		return b.status == http.StatusTooManyRequests || (b.status >= 500 && b.status != http.StatusNotImplemented)
	}
	if exitCode(err) != exitFailure || errors.Is(err, errNotDeployed) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrAccess) || errors.Is(err, store.ErrCorrupt) || errors.Is(err, context.Canceled) {
		return false
	}
	if code := store.HTTPStatus(err); code != 0 {
		return code == http.StatusTooManyRequests || code >= 500
	}
	var netErr net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &opErr) || errors.As(err, &dnsErr) ||
		errors.As(err, &netErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// retry runs attempt until it succeeds, fails in a way that won't heal,
// or has run 1+retries times; each attempt has its own --timeout, and
// the n-th retry waits n times --retry-delay first, saying so on stderr.
func (e *env) retry(what string, f retryFlags, attempt func(ctx context.Context) error) error {
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(e.base, e.timeout)
		err := attempt(ctx)
		cancel()
		if err == nil || n >= f.retries || !healable(err) {
			return err
		}
		delay := time.Duration(n+1) * f.delay
		fmt.Fprintf(e.stderr, "bucketops: %s: attempt %d of %d failed: %v; again in %s\n", what, n+1, f.retries+1, err, delay)
		if sleep(e.base, delay) != nil {
			return err
		}
	}
}

// sleep waits d, or until ctx is done (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
