package integration

import (
	"slices"
	"testing"
)

func TestParseLevers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", leverNames},
		{"all", leverNames},
		{"none", nil},
		{"sync-first", []string{"sync-first"}},
		{"tar-exclude, sync-first", []string{"sync-first", "tar-exclude"}},
		// no-validate is never the install's: only when named.
		{"all,no-validate", append(slices.Clone(leverNames), "no-validate")},
		{"no-validate", []string{"no-validate"}},
		{"sync-first,all", leverNames},
	} {
		l, err := parseLevers(tc.in)
		if err != nil || !slices.Equal(l.names(), tc.want) {
			t.Errorf("parseLevers(%q) = %v, %v; want %v", tc.in, l.names(), err, tc.want)
		}
	}
	if _, err := parseLevers("sync-frist"); err == nil {
		t.Error("a misspelt lever was accepted")
	}
}
