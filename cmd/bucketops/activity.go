package main

import (
	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newActivity(e *env) *cobra.Command {
	var q activityQuery
	cmd := &cobra.Command{
		Use:   "activity",
		Short: "Print the publishes of a time window, every app's, as CSV or JSON",
		Long: `activity prints the bridge's activity export: every publish (and retirement)
of the window, newest first, as the auditors' activity page exports it, with
each release's signature status. CSV by default; -o json prints the JSON
export. A window of more than 10000 publishes lists only the newest 10000:
a warning on stderr says so (and the JSON's "truncated" is true).

The window is --from (default 7 days before --to) to --to (default now),
each an RFC 3339 time, a UTC date and time (2026-12-04T10:00) or a date;
--prefix keeps the apps under a prefix, --author the publishes whose author
contains the text (case-insensitive).

The bridge comes from BUCKETOPS_BRIDGE and its bearer token from the file
BUCKETOPS_TOKEN_FILE: an auditor token (or the reader token). A scheduled
report needs no browser.`,
		Example: `  bucketops activity --from 2026-12-01 --to 2026-12-08 > activity.csv
  bucketops activity --prefix prod --author alice -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.prefix != "" {
				if err := store.ValidatePrefix(q.prefix); err != nil {
					return usageError{err}
				}
			}
			q.format = "csv"
			if e.json() {
				q.format = "json"
			}
			base, token, err := e.bridge("auditor or reader")
			if err != nil {
				return err
			}
			return getActivity(cmd.Context(), base, token, q, e.stdout, e.stderr)
		},
	}
	cmd.Flags().StringVar(&q.from, "from", "", "the window's start, included (default 7 days before --to)")
	cmd.Flags().StringVar(&q.to, "to", "", "the window's end, excluded (default now)")
	cmd.Flags().StringVar(&q.prefix, "prefix", "", "only the apps under this prefix (prod, prod/payments)")
	cmd.Flags().StringVar(&q.author, "author", "", "only the publishes whose author contains this text, case-insensitive")
	return cmd
}
