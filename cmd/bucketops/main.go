// Command bucketops publishes Kubernetes manifests as releases in a versioned
// GCS bucket, shows their history, and is the Argo CD plugin's generate
// command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bucketops:", err)
	}
	os.Exit(exitCode(err))
}

// run executes one command line; main is the only caller that exits.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	out := &countingWriter{w: stdout}
	e := &env{stdin: stdin, stdout: out, stderr: stderr, getenv: os.Getenv, waiting: &gcsWait{}}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(out)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if e.cancel != nil {
		e.cancel()
	}
	if errors.Is(err, context.DeadlineExceeded) && exitCode(err) == exitFailure {
		// The bucket didn't answer in time. A write it took before the
		// deadline is whole (one object, one generation), and the same
		// push again is a no-op or completes it.
		err = fmt.Errorf("gave up after --timeout %s: %w; nothing half-written is left, run the same command again (a release already published is left unchanged) or give a longer --timeout", e.timeout, err)
	}
	e.waiting.stop()
	err = e.waiting.explain(err)
	if err != nil && e.output == "json" && out.n == 0 {
		writeErrorObject(stdout, err)
	}
	return err
}
