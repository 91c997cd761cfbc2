package main

import (
	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newRetire(e *env) *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "retire APP",
		Short: "Publish a tombstone: the app is deliberately empty",
		Long: `retire publishes an empty release of kind tombstone. The bridge renders it as
no objects at all, so Argo CD prunes everything the app deployed. It is the
only release that may be empty: an empty push is an error, never a prune.`,
		Example: `  bucketops retire dev/old-service -m "replaced by dev/new-service"`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := store.ValidateApp(a[0]); err != nil {
				return err
			}
			if err := f.validate(e); err != nil {
				return err
			}
			pol, err := f.policy(e)
			if err != nil {
				return err
			}
			if err := checkRelease(pol, a[0], nil); err != nil {
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
			res, err := s.Retire(ctx, a[0], p)
			if err != nil {
				return err
			}
			return e.printResult(res)
		},
	}
	f.register(cmd, false)
	return cmd
}
