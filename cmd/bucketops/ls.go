package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newLs(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List apps and their head releases",
		Long: `ls lists the apps under PREFIX with their head release: the app, the
generation, when it was published and its message, in 80 columns; -o wide adds
the sequence, kind, resources, author, source and digest, and -o json gives
every field.`,
		Example: `  bucketops ls
  bucketops ls prod -o wide
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
			if e.output == "wide" || e.json() {
				return e.printReleases(rels, nil, nil, true)
			}
			return e.printHeads(rels)
		},
	}
}

// lsWidth is the terminal width ls's table fits.
const lsWidth = 80

// printHeads is ls's table in 80 columns: the app, its head's generation,
// when it was published and as much of its message as fits (-o wide has
// every column).
func (e *env) printHeads(rels []store.Release) error {
	appW := len("APP")
	for _, r := range rels {
		appW = max(appW, utf8.RuneCountInString(r.App))
	}
	const genW, timeW, gaps = 16, 20, 3 * 2
	msgW := max(lsWidth-appW-genW-timeW-gaps, 12)
	tw := e.table()
	fmt.Fprintln(tw, "APP\tGENERATION\tPUBLISHED\tMESSAGE")
	for _, r := range rels {
		msg := r.Message
		switch {
		case r.Kind == store.KindTombstone:
			msg = "(retired) " + msg
		case r.Origin != "":
			msg = "[from " + r.Origin + "] " + msg
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.App, r.Generation, formatTime(r.Time), truncate(msg, msgW))
	}
	return tw.Flush()
}

// truncate keeps s on one line of at most n runes, ending in … when cut.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	switch {
	case s == "":
		return "-"
	case utf8.RuneCountInString(s) > n:
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}
