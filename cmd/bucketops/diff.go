package main

import (
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

func newDiff(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "diff APP@GEN1 [APP@GEN2]",
		Short: "Show what changed between two releases, per Kubernetes object",
		Long: `diff compares two releases object by object (matched by group, kind, namespace
and name) and prints a unified diff of each object that was added, removed or
changed. The second release defaults to the head of the first one's app.
SOPS-encrypted values are compared by ciphertext and never decrypted, so a
re-encrypted Secret shows as changed even when its values are the same.`,
		Example: `  bucketops diff prod/payments@1733150000000000
  bucketops diff staging/payments prod/payments -o json`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			from, err := store.ParseRef(a[0])
			if err != nil {
				return err
			}
			to := store.Ref{App: from.App}
			if len(a) == 2 {
				if to, err = store.ParseRef(a[1]); err != nil {
					return err
				}
			}
			s, closeStore, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			out, err := diffReleases(cmd, s, from, to)
			if err != nil {
				return err
			}
			if e.json() {
				return e.printJSON(out)
			}
			if len(out.Changes) == 0 {
				_, err := fmt.Fprintf(e.stdout, "no changes between %s and %s (%d objects)\n", out.From, out.To, out.Unchanged)
				return err
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
			_, err = fmt.Fprintf(e.stdout, "%d added, %d removed, %d changed, %d unchanged between %s and %s\n",
				count["added"], count["removed"], count["changed"], out.Unchanged, out.From, out.To)
			return err
		},
	}
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
