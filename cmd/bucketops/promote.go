package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newPromote(e *env) *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "promote SRC[@GENERATION|@COMMIT] DST",
		Short: "Publish a release of one app as the new release of another",
		Long: `promote copies the bytes of SRC's head (or of the given generation) to DST as
DST's new release, recording SRC@GENERATION as its origin. The source's digest
is checked first, and the write is conditional on DST's head generation like
any publish.`,
		Example: `  bucketops promote staging/payments prod/payments
  bucketops promote staging/payments@1733150000000000 prod/payments --sequence 42`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			src, err := parseRelease(a[0])
			if err != nil {
				return err
			}
			if err := store.ValidateApp(a[1]); err != nil {
				return err
			}
			return e.copyRelease(cmd, &f, src.ref, a[1], src.revision())
		},
	}
	f.register(cmd, false)
	return cmd
}

func newRollback(e *env) *cobra.Command {
	var f publishFlags
	var to string
	cmd := &cobra.Command{
		Use:   "rollback APP --to GENERATION",
		Short: "Publish an earlier release of an app again as its new head",
		Long: `rollback publishes the bytes of APP@GENERATION as a new generation of APP,
recording the origin. History is never rewritten: the rollback is a release
of its own, visible in bucketops log. --to takes a generation or the release's
commit in the bridge's git view (the SHA Argo CD shows; 40 hex digits, or a
unique prefix of 7 or more with a letter in it).`,
		Example: `  bucketops rollback prod/payments --to 1733150000000000 -m "bad config in 42"
  bucketops rollback prod/payments --to 9717af3c43b8`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := store.ValidateApp(a[0]); err != nil {
				return err
			}
			if to == "" {
				return usagef("--to: name the generation or commit to roll back to (see bucketops log %s)", a[0])
			}
			return e.copyRelease(cmd, &f, store.Ref{App: a[0]}, a[0], to)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the generation, or the commit SHA in the git view, to publish again (required)")
	f.register(cmd, false)
	return cmd
}

// copyRelease copies src to dst; to, when set (rollback --to), names src's
// generation or commit.
func (e *env) copyRelease(cmd *cobra.Command, f *publishFlags, src store.Ref, dst, to string) error {
	if err := f.validate(e); err != nil {
		return err
	}
	pol, err := f.policy(e)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	p := f.publication(cmd, e)
	closeSigner, err := f.sign(ctx, e, &p)
	if err != nil {
		return err
	}
	defer closeSigner()
	s, closeStore, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	if to != "" {
		if src.Generation, err = e.revision(ctx, s, src.App, to); err != nil {
			return err
		}
	}
	if err := checkCopy(ctx, pol, s, src, dst); err != nil {
		return err
	}
	res, err := s.Copy(ctx, src, dst, p)
	if err != nil {
		return err
	}
	return e.printResult(res)
}

// revision resolves rollback --to: a generation costs a read (none under
// 7 digits), a commit, or digits that name no generation, the whole
// history.
func (e *env) revision(ctx context.Context, s *store.Store, app, to string) (int64, error) {
	if strings.Trim(to, "0123456789") == "" && len(to) != 40 {
		gen, err := resolveRevision(nil, nil, app, to)
		if err != nil {
			return 0, err
		}
		return e.generationOrCommit(ctx, s, app, gen, to)
	}
	hist, byGen, err := e.commits(ctx, s, app)
	if err != nil {
		return 0, err
	}
	return resolveRevision(hist, byGen, app, to)
}
