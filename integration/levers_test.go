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
		// generate-first-always is a variant of generate-first, raced
		// against it only when named.
		{"all,generate-first-always", append(slices.Clone(leverNames), "generate-first-always")},
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

// The stack's bridge runs with the levers' flags: the install's generates
// first only where a comparison is expiring, against the stack's own
// timeout.reconciliation; generate-first-always and none say so.
func TestBridgeArgs(t *testing.T) {
	for _, tc := range []struct {
		levers string
		want   []string
	}{
		{"all", []string{"--sync-automated=true", "--generate-first=expiring", "--argocd-reconciliation=120s"}},
		{"all,generate-first-always", []string{"--sync-automated=true", "--generate-first=always", "--argocd-reconciliation=120s"}},
		{"none", []string{"--sync-automated=false", "--generate-first=never", "--argocd-reconciliation=120s"}},
	} {
		l, err := parseLevers(tc.levers)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.bridgeArgs("120s"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.levers, got, tc.want)
		}
	}
}
