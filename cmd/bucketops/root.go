package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/storage"
	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// Exit codes, part of the CLI's contract (docs/cli.md).
const (
	exitOK       = 0
	exitFailure  = 1
	exitInvalid  = 2
	exitConflict = 3
	exitStale    = 4
	// exitNotDeployed (5, wait.go): the release failed, or the wait timed out.
	// exitUnverified (6, sign.go): a release did not verify.
	// exitRolledBack (7, sign.go): verify --chain found the history cut
	// below the rollback floor.
)

// usageError marks a command line the user has to fix.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func exitCode(err error) int {
	var usage usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage), errors.Is(err, store.ErrInvalidApp), errors.Is(err, store.ErrInvalidLocation),
		errors.Is(err, render.ErrInvalid), errors.Is(err, store.ErrBucket), errors.Is(err, policy.ErrDenied),
		errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrInvalidRetention):
		return exitInvalid
	case errors.Is(err, errDiffers):
		return exitDiffers
	case errors.Is(err, errRolledBack):
		return exitRolledBack
	case errors.Is(err, errUnverified):
		return exitUnverified
	case errors.Is(err, errNotDeployed):
		return exitNotDeployed
	case errors.Is(err, store.ErrStale):
		return exitStale
	case errors.Is(err, store.ErrConflict):
		return exitConflict
	}
	return exitFailure
}

// env is what a command may touch of the process: streams and environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	bucket  string
	output  string
	verbose bool
	timeout time.Duration
	cancel  context.CancelFunc
	// base is the command's context before --timeout: waits have their own.
	base context.Context
	// waiting says on stderr what a command waiting on GCS waits for.
	waiting *gcsWait
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "bucketops",
		Short: "Publish Kubernetes manifests to a versioned GCS bucket and browse their history",
		Long: `bucketops publishes rendered Kubernetes manifests as releases: each release is a new
generation of one object per app in a versioned Google Cloud Storage bucket,
written with generation preconditions so concurrent pipelines never lose an
update and an older pipeline never overwrites a newer one.

The bucket comes from --bucket gs://BUCKET[/PREFIX] or BUCKETOPS_BUCKET.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// With no subcommand matched, the arguments are a mistyped command.
		Args: func(cmd *cobra.Command, a []string) error {
			if len(a) > 0 {
				return unknownCommand(cmd, a[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if e.output != "text" && e.output != "json" && e.output != "wide" {
				return usagef("-o %q: use text, json or wide (ls's every column)", e.output)
			}
			if e.timeout <= 0 {
				return usagef("--timeout %s: give a positive duration such as 30s or 2m", e.timeout)
			}
			// Every request of the command finishes within --timeout.
			e.base = cmd.Context()
			e.waiting.start(e.stderr, e.getenv("STORAGE_EMULATOR_HOST"), e.timeout)
			ctx, cancel := context.WithTimeout(cmd.Context(), e.timeout)
			cmd.SetContext(ctx)
			e.cancel = cancel
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&e.bucket, "bucket", "", "the bucket, gs://BUCKET[/PREFIX] (default $BUCKETOPS_BUCKET)")
	pf.StringVarP(&e.output, "output", "o", "text", "output format: text, json, or wide (ls: every column)")
	pf.BoolVarP(&e.verbose, "verbose", "v", false, "log requests and retries to stderr")
	pf.DurationVar(&e.timeout, "timeout", 2*time.Minute, "give up (exit 1) when the command, retries included, takes longer")
	root.AddCommand(
		newPush(e), newLog(e), newShow(e), newDiff(e), newPromote(e), newRollback(e),
		newRetire(e), newLs(e), newVersion(e), newPlugin(e), newWait(e), newKeygen(e), newVerify(e), newDoctor(e), newActivity(e),
	)
	wireCompletion(e, root)
	return root
}

// args wraps a cobra argument check so a wrong count is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{fmt.Errorf("%w; usage: %s", err, cmd.UseLine())}
		}
		return nil
	}
}

func (e *env) logger() *slog.Logger {
	if !e.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// location resolves the bucket without making a request.
func (e *env) location() (store.Location, error) {
	b := e.bucket
	if b == "" {
		b = e.getenv("BUCKETOPS_BUCKET")
	}
	if b == "" {
		return store.Location{}, usagef("no bucket: pass --bucket gs://BUCKET[/PREFIX] or set BUCKETOPS_BUCKET")
	}
	return store.ParseLocation(b)
}

// openStore connects to the bucket. Validate everything else first: a bad
// command line must not cost a request.
func (e *env) openStore(ctx context.Context) (*store.Store, func(), error) {
	loc, err := e.location()
	if err != nil {
		return nil, nil, err
	}
	// JSON reads work against GCS and against the emulator alike
	// (STORAGE_EMULATOR_HOST), which serves the XML API only on its public host.
	client, err := storage.NewClient(ctx, storage.WithJSONReads())
	if err != nil {
		return nil, nil, fmt.Errorf("connect to GCS: %w", err)
	}
	st := store.New(client, loc, e.logger(), store.FailFastOnRefused(), store.WithRetryNotice(e.waiting.note))
	return st, func() { client.Close() }, nil
}

func (e *env) json() bool { return e.output == "json" }

func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (e *env) table() *tabwriter.Writer {
	return tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
