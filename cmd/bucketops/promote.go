package main

import (
	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newPromote(e *env) *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "promote SRC[@GENERATION] DST",
		Short: "Publish a release of one app as the new release of another",
		Long: `promote copies the bytes of SRC's head (or of the given generation) to DST as
DST's new release, recording SRC@GENERATION as its origin. The source's digest
is checked first, and the write is conditional on DST's head generation like
any publish.`,
		Example: `  bucketops promote staging/payments prod/payments
  bucketops promote staging/payments@1733150000000000 prod/payments --sequence 42`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			src, err := store.ParseRef(a[0])
			if err != nil {
				return err
			}
			if err := store.ValidateApp(a[1]); err != nil {
				return err
			}
			return e.copyRelease(cmd, &f, src, a[1])
		},
	}
	f.register(cmd, false)
	return cmd
}

func newRollback(e *env) *cobra.Command {
	var f publishFlags
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback APP --to GENERATION",
		Short: "Publish an earlier release of an app again as its new head",
		Long: `rollback publishes the bytes of APP@GENERATION as a new generation of APP,
recording the origin. History is never rewritten: the rollback is a release
of its own, visible in bucketops log.`,
		Example: `  bucketops rollback prod/payments --to 1733150000000000 -m "bad config in 42"`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := store.ValidateApp(a[0]); err != nil {
				return err
			}
			if to <= 0 {
				return usagef("--to: name the generation to roll back to (see bucketops log %s)", a[0])
			}
			return e.copyRelease(cmd, &f, store.Ref{App: a[0], Generation: to}, a[0])
		},
	}
	cmd.Flags().Int64Var(&to, "to", 0, "the generation to publish again (required)")
	f.register(cmd, false)
	return cmd
}

func (e *env) copyRelease(cmd *cobra.Command, f *publishFlags, src store.Ref, dst string) error {
	if err := f.validate(); err != nil {
		return err
	}
	pol, err := f.policy(e)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	s, closeStore, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := checkCopy(ctx, pol, s, src, dst); err != nil {
		return err
	}
	res, err := s.Copy(ctx, src, dst, f.publication(cmd, e))
	if err != nil {
		return err
	}
	return e.printResult(res)
}
