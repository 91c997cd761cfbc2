package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

type diffOutput struct {
	From      string                `json:"from"`
	To        string                `json:"to"`
	Changes   []render.ObjectChange `json:"changes"`
	Unchanged int                   `json:"unchanged"`
}

// exitDiffers is diff --exit-code's answer when the releases differ: not
// 1, which is a failure to compare, so a drift check tells them apart.
const exitDiffers = 8

// errDiffers is diff --exit-code's error when the releases differ.
var errDiffers = errors.New("the releases differ (--exit-code)")

func newDiff(e *env) *cobra.Command {
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "diff APP[@REV1] [APP@REV2]",
		Short: "Show what changed between two releases, per Kubernetes object",
		Long: `diff compares two releases object by object (matched by group, kind, namespace
and name) and prints a unified diff of each object that was added, removed or
changed. A release is APP@GENERATION or APP@COMMIT (the SHA, or a prefix of 7
or more, that bucketops log and Argo CD show). The second release defaults to
the head of the first one's app; APP alone compares the head with the release
before it. With --exit-code it exits 8 when the releases differ (0 when they
don't, 1 when they couldn't be compared), for drift checks.
SOPS-encrypted values are compared by ciphertext and never decrypted, so a
re-encrypted Secret shows as changed even when its values are the same.`,
		Example: `  bucketops diff prod/payments              # the head against the release before it
  bucketops diff prod/payments@1733150000000000
  bucketops diff prod/payments@3f2a9c1 prod/payments@b71e004
  bucketops diff staging/payments prod/payments --exit-code -o json`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			fromArg, err := parseRelease(a[0])
			if err != nil {
				return err
			}
			toArg := releaseArg{ref: store.Ref{App: fromArg.ref.App}}
			if len(a) == 2 {
				if toArg, err = parseRelease(a[1]); err != nil {
					return err
				}
			}
			s, closeStore, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			from, err := fromArg.resolve(cmd.Context(), e, s)
			if err != nil {
				return err
			}
			to, err := toArg.resolve(cmd.Context(), e, s)
			if err != nil {
				return err
			}
			if len(a) == 1 && from.Generation == 0 {
				// The head against the release before it.
				page, err := s.History(cmd.Context(), from.App, store.HistoryOptions{Limit: 2})
				if err != nil {
					return err
				}
				if len(page) < 2 {
					return fmt.Errorf("%s has one release, %s: nothing before it to compare with", from.App, page[0].Ref())
				}
				from, to = page[1].Ref(), page[0].Ref()
			}
			out, err := diffReleases(cmd, s, from, to)
			if err != nil {
				return err
			}
			differs := len(out.Changes) > 0
			if e.json() {
				if err := e.printJSON(out); err != nil {
					return err
				}
			} else if !differs {
				_, err := fmt.Fprintf(e.stdout, "no changes between %s and %s (%d objects)\n", out.From, out.To, out.Unchanged)
				return err
			}
			if e.json() {
				if differs && exitCode {
					return errDiffers
				}
				return nil
			}
			for _, c := range out.Changes {
				note := ""
				if c.Encrypted {
					note = ", encrypted: ciphertext compared, not decrypted"
				}
				fmt.Fprintf(e.stdout, "%s %s (%s%s)\n%s\n", c.Change, c.Object, c.Source, note, c.Diff)
			}
			count := map[string]int{}
			for _, c := range out.Changes {
				count[c.Change]++
			}
			if _, err = fmt.Fprintf(e.stdout, "%d added, %d removed, %d changed, %d unchanged between %s and %s\n",
				count["added"], count["removed"], count["changed"], out.Unchanged, out.From, out.To); err != nil {
				return err
			}
			if exitCode {
				return errDiffers
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 8 when the releases differ, 0 when they don't (1 stays a failure to compare)")
	return cmd
}

func diffReleases(cmd *cobra.Command, s *store.Store, fromRef, toRef store.Ref) (diffOutput, error) {
	load := func(ref store.Ref) (store.Release, []render.Object, error) {
		rel, data, err := s.Read(cmd.Context(), ref)
		if err != nil || rel.Kind == store.KindTombstone {
			return rel, nil, err
		}
		parsed, err := render.Parse(data)
		if err != nil {
			return rel, nil, fmt.Errorf("%s: %w", rel.Ref(), err)
		}
		return rel, parsed.Objects, nil
	}
	from, old, err := load(fromRef)
	if err != nil {
		return diffOutput{}, err
	}
	to, cur, err := load(toRef)
	if err != nil {
		return diffOutput{}, err
	}
	out := diffOutput{From: from.Ref().String(), To: to.Ref().String()}
	out.Changes, out.Unchanged = render.DiffObjects(out.From, old, out.To, cur, func(o render.Object) []byte { return o.Body })
	return out, nil
}
