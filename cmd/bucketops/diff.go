package main

import (
	"bytes"
	"fmt"
	"slices"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// objectChange is one Kubernetes object that differs between two releases.
type objectChange struct {
	Object    string `json:"object"`
	Change    string `json:"change"` // added, removed or changed
	Source    string `json:"source"`
	Encrypted bool   `json:"encrypted"`
	Diff      string `json:"diff"`
}

type diffOutput struct {
	From      string         `json:"from"`
	To        string         `json:"to"`
	Changes   []objectChange `json:"changes"`
	Unchanged int            `json:"unchanged"`
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
	load := func(ref store.Ref) (store.Release, map[string]render.Object, error) {
		rel, data, err := s.Read(cmd.Context(), ref)
		if err != nil {
			return rel, nil, err
		}
		objs := map[string]render.Object{}
		if rel.Kind == store.KindTombstone {
			return rel, objs, nil
		}
		parsed, err := render.Parse(data)
		if err != nil {
			return rel, nil, fmt.Errorf("%s: %w", rel.Ref(), err)
		}
		for _, o := range parsed.Objects {
			objs[o.Key()] = o
		}
		return rel, objs, nil
	}
	from, old, err := load(fromRef)
	if err != nil {
		return diffOutput{}, err
	}
	to, cur, err := load(toRef)
	if err != nil {
		return diffOutput{}, err
	}
	out := diffOutput{From: from.Ref().String(), To: to.Ref().String(), Changes: []objectChange{}}
	keys := make([]string, 0, len(old)+len(cur))
	for k := range old {
		keys = append(keys, k)
	}
	for k := range cur {
		if _, ok := old[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		o, inOld := old[k]
		n, inNew := cur[k]
		c := objectChange{Change: "changed"}
		switch {
		case !inOld:
			c.Change, o = "added", render.Object{}
			c.Object, c.Source, c.Encrypted = n.String(), n.Source, n.Encrypted
		case !inNew:
			c.Change, n = "removed", render.Object{}
			c.Object, c.Source, c.Encrypted = o.String(), o.Source, o.Encrypted
		case bytes.Equal(o.Body, n.Body):
			out.Unchanged++
			continue
		default:
			c.Object, c.Source, c.Encrypted = n.String(), n.Source, n.Encrypted || o.Encrypted
		}
		c.Diff = udiff.Unified(out.From+" "+c.Object, out.To+" "+c.Object, string(o.Body), string(n.Body))
		out.Changes = append(out.Changes, c)
	}
	return out, nil
}
