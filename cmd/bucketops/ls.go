package main

import (
	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newLs(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List apps and their head releases",
		Example: `  bucketops ls
  bucketops ls prod -o json`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			prefix := ""
			if len(a) == 1 {
				prefix = a[0]
			}
			if err := store.ValidatePrefix(prefix); err != nil {
				return err
			}
			s, closeStore, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			rels, err := s.List(cmd.Context(), prefix)
			if err != nil {
				return err
			}
			return e.printReleases(rels, nil, nil, true)
		},
	}
}
