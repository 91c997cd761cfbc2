package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
)

func newLog(e *env) *cobra.Command {
	var opts store.HistoryOptions
	withCommits := true
	var asOf string
	var trust trustFlags
	var withDeploys bool
	cmd := &cobra.Command{
		Use:   "log APP",
		Short: "Show an app's releases, newest first",
		Long: `log lists the generations of APP's object, newest first: when each was
published, by whom, from what, with which sequence and digest, and the commit it
is in the bridge's git view (the revision Argo CD shows). Page with --limit and
--before (the last generation of the previous page).

The commits are computed from the whole history, which log then lists whatever
the page; --commits=false leaves them out, and then --limit 1 costs one request.

--as-of T shows the one release that was the head at T (RFC 3339, or a date:
its start, UTC): what Argo CD was given then.

SIGNATURE is each release's signature judged by the keys given (--key) or the
trust policy's rule for APP (--trust-policy), as the bridge judges it before
serving: verified (by which key), unsigned, or broken (the problem, as verify
names it), from the listing alone (the bytes are not read). Without either
flag it says "not checked". Judging lists the whole history.

--deploys shows, per release, where and when Argo CD ran it instead: each
Application it was live on, from when to when, a release Argo CD refuses, one
never deployed, or one older than the deploys Argo CD keeps
(revisionHistoryLimit). It asks the bridge (BUCKETOPS_BRIDGE, a reader token in
BUCKETOPS_TOKEN_FILE), which reads Argo CD's own record.`,
		Example: `  bucketops log prod/payments --limit 20
  bucketops log prod/payments -o json | jq '.[0].generation'
  bucketops log prod/payments --as-of 2026-12-01T09:30:00Z
  bucketops log prod/payments --trust-policy trust.yaml
  bucketops log prod/payments --deploys --limit 10`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := store.ValidateApp(a[0]); err != nil {
				return err
			}
			if opts.Limit < 0 || opts.Before < 0 {
				return usagef("--limit and --before must not be negative")
			}
			var at time.Time
			if asOf != "" {
				var err error
				if at, err = time.Parse(time.RFC3339Nano, asOf); err != nil {
					if at, err = time.Parse("2006-01-02", asOf); err != nil {
						return usagef("--as-of %q: give a time as 2026-12-01T09:30:00Z, or a date", asOf)
					}
				}
			}
			if withDeploys {
				if asOf != "" {
					return usagef("--deploys and --as-of don't combine: --deploys lists releases with where they were live")
				}
				return e.logDeploys(cmd.Context(), a[0], opts.Limit, opts.Before)
			}
			judge, err := trust.judge(cmd.Context())
			if err != nil {
				return err
			}
			s, closeStore, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			var hist []store.Release
			var byGen map[int64]string
			switch {
			case !withCommits && asOf == "" && !judge.Checks():
				rels, err := s.History(cmd.Context(), a[0], opts)
				if err != nil {
					return err
				}
				return e.printReleases(rels, nil, judged(judge, rels, nil), false)
			case !withCommits && asOf == "":
				// A release's link is judged against the one before it,
				// which may be on no page: the whole history is listed.
				hist, err = s.History(cmd.Context(), a[0], store.HistoryOptions{})
			default:
				hist, byGen, err = e.commits(cmd.Context(), s, a[0])
			}
			if err != nil {
				return err
			}
			if asOf != "" {
				rel, ok := store.HeadAt(hist, at)
				if !ok {
					return fmt.Errorf("%s: %w: no release was published at or before %s", a[0], store.ErrNotFound, at.Format(time.RFC3339))
				}
				return e.printReleases([]store.Release{rel}, byGen, judged(judge, []store.Release{rel}, hist), false)
			}
			var page []store.Release
			for _, r := range hist {
				if (opts.Before == 0 || r.Generation < opts.Before) && (opts.Limit == 0 || len(page) < opts.Limit) {
					page = append(page, r)
				}
			}
			return e.printReleases(page, byGen, judged(judge, page, hist), false)
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "show at most this many releases (0: all)")
	cmd.Flags().Int64Var(&opts.Before, "before", 0, "show only generations older than this one")
	cmd.Flags().BoolVar(&withCommits, "commits", true, "show each release's commit in the git view (lists the whole history)")
	cmd.Flags().StringVar(&asOf, "as-of", "", "show only the release that was the head at this time (RFC 3339, or a date)")
	trust.register(cmd)
	cmd.Flags().BoolVar(&withDeploys, "deploys", false, "show where and when Argo CD ran each release, from the bridge (BUCKETOPS_BRIDGE, BUCKETOPS_TOKEN_FILE)")
	return cmd
}

// judged returns the signature status of each of rels, judged from hist,
// the app's whole history newest first.
func judged(j provenance.Judge, rels, hist []store.Release) map[int64]provenance.Status {
	out := make(map[int64]provenance.Status, len(rels))
	for _, r := range rels {
		out[r.Generation] = j.Listed(r, hist)
	}
	return out
}

// loggedRelease is a release with its commit in the git view and the
// status of its signature.
type loggedRelease struct {
	store.Release
	Commit          string             `json:"commit,omitempty"`
	SignatureStatus *provenance.Status `json:"signature,omitempty"`
}

// printReleases writes releases as a JSON array (never null), or a table;
// commits, when not nil, adds each release's commit, and sigs its
// signature's status; withApp adds the app column (ls).
func (e *env) printReleases(rels []store.Release, commits map[int64]string, sigs map[int64]provenance.Status, withApp bool) error {
	if e.json() {
		out := make([]loggedRelease, len(rels))
		for i, r := range rels {
			out[i] = loggedRelease{Release: r, Commit: commits[r.Generation]}
			if st, ok := sigs[r.Generation]; ok {
				out[i].SignatureStatus = &st
			}
		}
		return e.printJSON(out)
	}
	tw := e.table()
	if withApp {
		fmt.Fprint(tw, "APP\t")
	}
	if commits != nil {
		fmt.Fprint(tw, "COMMIT\t")
	}
	fmt.Fprint(tw, "GENERATION\tTIME\tSEQUENCE\tKIND\tRESOURCES\tAUTHOR\tSOURCE\tDIGEST\t")
	if sigs != nil {
		fmt.Fprint(tw, "SIGNATURE\t")
	}
	fmt.Fprintln(tw, "MESSAGE")
	for _, r := range rels {
		if withApp {
			fmt.Fprintf(tw, "%s\t", r.App)
		}
		if commits != nil {
			// A prefix with a letter, which @COMMIT and --to read as a
			// commit where digits alone would be a generation.
			fmt.Fprintf(tw, "%s\t", gitview.ShortSHA(commits[r.Generation], 12))
		}
		seq := "-"
		if r.Sequence != 0 {
			seq = fmt.Sprint(r.Sequence)
		}
		kind := r.Kind
		if r.Current {
			kind += " (head)"
		}
		msg := r.Message
		if r.Origin != "" {
			msg = "[from " + r.Origin + "] " + msg
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t", r.Generation, formatTime(r.Time), seq, kind,
			r.Resources, orDash(r.Author), orDash(r.Source), shortDigest(r.Digest))
		if sigs != nil {
			fmt.Fprintf(tw, "%s\t", sigs[r.Generation].Short())
		}
		fmt.Fprintln(tw, oneLine(msg))
	}
	return tw.Flush()
}

// oneLine keeps a table row on one line and short, whatever the message holds.
func oneLine(s string) string {
	const max = 60
	s = strings.Join(strings.Fields(s), " ")
	switch {
	case s == "":
		return "-"
	case utf8.RuneCountInString(s) > max:
		return string([]rune(s)[:max]) + "…"
	}
	return s
}
