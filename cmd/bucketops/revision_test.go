package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/gitview"
)

// TestReleasesByCommit: the commit SHA bucketops log prints first (and
// Argo CD's History shows) names a release wherever a release is named:
// show, diff, verify and promote, whole or by a prefix of 7 or more.
func TestReleasesByCommit(t *testing.T) {
	startBucket(t)
	for _, v := range []string{"1", "2", "3"} {
		bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", v)}), "--sequence", v).must(t)
	}
	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/web", "-o", "json").must(t).stdout)
	first, second := log[2]["commit"].(string), log[1]["commit"].(string)
	gen1 := int64(log[2]["generation"].(float64))
	if len(first) != 40 {
		t.Fatalf("log's commit %q", first)
	}

	// The table shows a prefix that @COMMIT reads back as a commit.
	if table := bucketops(t, "", "log", "prod/web").must(t).stdout; !strings.Contains(table, gitview.ShortSHA(first, 12)+" ") {
		t.Errorf("log's table lacks the commit %s:\n%s", gitview.ShortSHA(first, 12), table)
	}
	for _, rev := range []string{first, gitview.ShortSHA(first, 7), gitview.ShortSHA(first, 12)} {
		out := bucketops(t, "", "show", "prod/web@"+rev, "--raw").must(t).stdout
		if !strings.Contains(out, `value: "1"`) {
			t.Errorf("show prod/web@%s: %q, want the first release", rev, out)
		}
	}
	out := bucketops(t, "", "diff", "prod/web@"+gitview.ShortSHA(first, 9), "prod/web@"+second, "-o", "json").must(t).stdout
	d := decode[map[string]any](t, out)
	if d["from"] != "prod/web@"+itoa(gen1) || len(d["changes"].([]any)) != 1 {
		t.Errorf("diff by commits: %s", out)
	}
	bucketops(t, "", "promote", "prod/web@"+gitview.ShortSHA(first, 8), "staging/web").must(t)
	if got := bucketops(t, "", "show", "staging/web", "--raw").must(t).stdout; !strings.Contains(got, `value: "1"`) {
		t.Errorf("promote by commit copied %q", got)
	}

	key := filepath.Join(t.TempDir(), "ci")
	bucketops(t, "", "keygen", "--out", key).must(t)
	if r := bucketops(t, "", "verify", "prod/web@"+gitview.ShortSHA(first, 7), "--key", key+".pub"); r.code != exitUnverified || !strings.Contains(r.stdout, itoa(gen1)) {
		t.Errorf("verify of an unsigned release by its commit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Wrong, short or unknown commits are clear errors.
	if r := bucketops(t, "", "show", "prod/web@abc12"); r.code != exitInvalid || !strings.Contains(r.stderr, "at least 7 hex digits") {
		t.Errorf("a 5-digit prefix: exit %d, %s", r.code, r.stderr)
	}
	if r := bucketops(t, "", "show", "prod/web@deadbeef"); r.code != exitFailure || !strings.Contains(r.stderr, "no release of prod/web is that commit") {
		t.Errorf("an unknown commit: exit %d, %s", r.code, r.stderr)
	}
	if r := bucketops(t, "", "verify", "prod/web@"+gitview.ShortSHA(first, 7), "--chain", "--key", "x.pub"); r.code != exitInvalid {
		t.Errorf("verify --chain with a commit: exit %d, %s", r.code, r.stderr)
	}
}

// TestDiffOfAnAppComparesItsLastTwoReleases: diff APP is what the last
// publish changed, and --exit-code tells a drift check whether two
// releases differ (8) from whether they could be compared (1).
func TestDiffOfAnAppComparesItsLastTwoReleases(t *testing.T) {
	startBucket(t)
	for _, v := range []string{"1", "2"} {
		bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", v)}), "--sequence", v).must(t)
	}
	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/web", "-o", "json", "--commits=false").must(t).stdout)
	head, before := int64(log[0]["generation"].(float64)), int64(log[1]["generation"].(float64))
	d := decode[map[string]any](t, bucketops(t, "", "diff", "prod/web", "-o", "json").must(t).stdout)
	if d["from"] != "prod/web@"+itoa(before) || d["to"] != "prod/web@"+itoa(head) || len(d["changes"].([]any)) != 1 {
		t.Errorf("diff prod/web: %v, want the release before the head against the head", d)
	}
	if r := bucketops(t, "", "diff", "prod/web", "--exit-code"); r.code != exitDiffers || !strings.Contains(r.stdout, "1 changed") {
		t.Errorf("diff --exit-code of two different releases: exit %d, %s", r.code, r.stdout)
	}
	if r := bucketops(t, "", "diff", "prod/web@"+itoa(head), "prod/web", "--exit-code"); r.code != 0 {
		t.Errorf("diff --exit-code of a release with itself: exit %d, %s", r.code, r.stderr)
	}
	if r := bucketops(t, "", "diff", "prod/nothing", "--exit-code"); r.code != exitFailure {
		t.Errorf("diff --exit-code of a missing app: exit %d, want 1", r.code)
	}
	bucketops(t, "", "push", "dev/one", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})).must(t)
	if r := bucketops(t, "", "diff", "dev/one"); r.code != exitFailure || !strings.Contains(r.stderr, "nothing before it") {
		t.Errorf("diff of an app with one release: exit %d, %s", r.code, r.stderr)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
