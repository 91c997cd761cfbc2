package render

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// lookup reaches a mapping at most once per alias that names it and
// searches it once, so a key missing from nested merges costs the number of
// aliases, whatever the number of paths through them: 10^4 paths in the
// small case (where a lookup that walks them fails at once), 10^12 in the
// large one. (Parse refuses such documents for their aliases first; this
// holds lookup to it on its own.)
func TestLookupReachesEachMappingOncePerAlias(t *testing.T) {
	for _, levels := range []int{4, 12} {
		var b strings.Builder
		b.WriteString("l0: &l0 {k: v}\n")
		for i := 1; i <= levels; i++ {
			fmt.Fprintf(&b, "l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
		}
		fmt.Fprintf(&b, "top: {<<: *l%d, name: x}\n", levels)
		root, err := decode([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		aliases := measureAliases(root).aliases
		top := directValue(root, "top")
		visits := map[*yaml.Node]int{}
		if v := lookup(top, "namespace", visits); v != nil {
			t.Errorf("%d levels: found namespace %v", levels, v)
		}
		reached := 0
		for _, n := range visits {
			reached += n
		}
		if reached > aliases+1 || len(visits) != levels+2 {
			t.Fatalf("%d levels: lookup reached %d mappings %d times, want each of the %d once and at most once per alias (%d) besides the first",
				levels, len(visits), reached, levels+2, aliases)
		}
		if v := value(top, "k"); v == nil || v.Value != "v" {
			t.Errorf("%d levels: k through the merges is %v, want v", levels, v)
		}
	}
}

// value reads a key the way YAML-to-JSON conversion does.
func TestValueFollowsAliasesAndMerges(t *testing.T) {
	cases := []struct {
		name, doc, want string // want "" for no value
	}{
		{"a key of the mapping itself", "m: {k: own}", "own"},
		{"an alias to a scalar", "v: &v aliased\nm: {k: *v}", "aliased"},
		{"a merged mapping written in place", "m: {<<: {k: merged}}", "merged"},
		{"a key of the mapping wins over a merged one, after the merge", "a: &a {k: merged}\nm: {<<: *a, k: own}", "own"},
		{"a key of the mapping wins over a merged one, before the merge", "a: &a {k: merged}\nm: {k: own, <<: *a}", "own"},
		{"an earlier merged mapping wins over a later one", "a: &a {k: a}\nb: &b {k: b}\nm: {<<: [*a, *b]}", "a"},
		{"a merged mapping's own key wins over what it merges", "a: &a {k: a}\nb: &b {<<: *a, k: b}\nm: {<<: [*b, *a]}", "b"},
		{"merges of merges", "a: &a {k: deep}\nb: &b {<<: *a}\nc: &c {<<: [*b, *b]}\nm: {<<: [*c, *b]}", "deep"},
		{"a merge of a mapping seen before without the key", "a: &a {x: 1}\nb: &b {k: b}\nm: {<<: [*a, *a, *b]}", "b"},
		{"a merge of something that isn't a mapping", "s: &s text\nm: {<<: *s}", ""},
		{"a mapping merging itself", "m: &m {<<: *m}", ""},
		{"a missing key", "a: &a {x: 1}\nm: {<<: *a}", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, err := decode([]byte(c.doc + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if v := value(directValue(root, "m"), "k"); v != nil {
				got = v.Value
			}
			if got != c.want {
				t.Errorf("k is %q, want %q", got, c.want)
			}
		})
	}
}
