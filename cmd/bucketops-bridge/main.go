// Command bucketops-bridge serves releases from the bucket to Argo CD. With no
// --bucket it runs in local mode: an embedded, versioned GCS emulator that the
// bucketops CLI can publish to.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bucketops-bridge:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }
