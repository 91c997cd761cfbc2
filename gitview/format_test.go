package gitview_test

import (
	"testing"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// format2Releases are goldenReleases published by a bucketops that records
// bucketops-format 2, with a source in each form ParseSource knows, one it
// doesn't, and none.
func format2Releases() []store.Release {
	rels := goldenReleases()
	sources := []string{
		"acme/payments@0123456789abcdef0123456789abcdef01234567",
		"https://github.com/acme/payments/commit/89abcdef0123456789abcdef0123456789abcdef",
		"https://ci.example.com/acme/payments/pipelines/42",
		"",
		"https://gitlab.example.com/acme/payments.git@fedcba9",
		"0123456",
	}
	for i := range rels {
		rels[i].Format, rels[i].Source = 2, sources[i]
	}
	return rels
}

// Format 2's commits are frozen like format 1's: these SHAs are what
// Argo CD records for releases published from now on.
func TestGoldenSHAsFormat2(t *testing.T) {
	loc := store.Location{Bucket: "acme-releases", Prefix: "clusters/eu"}
	got, err := gitview.Chain(loc, format2Releases())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"498e4ed2af43d55b3d0d4b417f7c250d79a9dea2",
		"2f204f927e70e263b9d2f0e5d86f1e6d006a3f5b",
		"e52c037b843a99b97ec9e92053d94f74377d409e",
		"421182634eaf174d19c119914289722b5fd0c463",
		"d86bc910428c2ba461b5cd206c22bce2aa4821c2",
		"0772bc03e55925057dce824364b9d4eb8b77a457",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("release %d: commit %s, want %s", i, got[i], want[i])
		}
	}
}

// A bucket whose older releases were published before bucketops-format
// and newer ones after: the older commits keep the SHAs Argo CD recorded
// (TestGoldenSHAs'), and the newer ones are format 2's, chained on them.
func TestAHistoryMixingFormatsKeepsTheOldSHAs(t *testing.T) {
	loc := store.Location{Bucket: "acme-releases", Prefix: "clusters/eu"}
	old, err := gitview.Chain(loc, goldenReleases())
	if err != nil {
		t.Fatal(err)
	}
	mixed := goldenReleases()
	for i := 3; i < len(mixed); i++ {
		mixed[i].Format, mixed[i].Source = 2, "acme/payments@0123456789abcdef0123456789abcdef01234567"
	}
	got, err := gitview.Chain(loc, mixed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got[i] != old[i] {
			t.Errorf("release %d, from before bucketops-format: commit %s, want the recorded %s", i, got[i], old[i])
		}
	}
	for i := 3; i < len(got); i++ {
		if got[i] == old[i] {
			t.Errorf("release %d, of format 2 with a source: commit %s is format 1's", i, got[i])
		}
	}
	// The SHAs are the bucket's: a format recorded as something this
	// bridge doesn't know yet is built as the newest it knows, the same
	// on every replica of this version.
	for i := 3; i < len(mixed); i++ {
		mixed[i].Format = 3
	}
	if again, _ := gitview.Chain(loc, mixed); again[5] != got[5] {
		t.Errorf("format 3 gives commit %s, want format 2's %s", again[5], got[5])
	}
}

func TestShortSHA(t *testing.T) {
	for _, tc := range []struct {
		sha  string
		n    int
		want string
	}{
		{"1551797a2b", 7, "1551797a"}, // digits alone would read as a generation
		{"abc1234567", 7, "abc1234"},
		{"12345678901", 7, "12345678901"}, // no letter: whole
		{"1234567890abcdef", 12, "1234567890ab"},
	} {
		if got := gitview.ShortSHA(tc.sha, tc.n); got != tc.want {
			t.Errorf("ShortSHA(%q, %d) = %q, want %q", tc.sha, tc.n, got, tc.want)
		}
	}
}
