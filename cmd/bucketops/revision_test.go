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

// TestCommitPrefixOfDigitsAlone: Argo CD's History shows 7 hex digits of
// a commit, and for about 1 commit in 27 they are digits alone. Pasted
// after @ or into rollback --to they name no generation, so they are read
// as the commit's prefix rather than refused as a missing release.
func TestCommitPrefixOfDigitsAlone(t *testing.T) {
	startBucket(t)
	var short string // 7 decimal digits that start a release's commit
	var gen string   // that release's generation
	var seen map[string]bool
	for batch := 0; short == "" && batch < 20; batch++ {
		for i := range 20 {
			v := strconv.Itoa(batch*20 + i)
			bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", v)})).must(t)
		}
		seen = map[string]bool{}
		for _, e := range decode[[]map[string]any](t, bucketops(t, "", "log", "prod/web", "-o", "json").must(t).stdout) {
			c := e["commit"].(string)
			seen[c[:7]] = true
			if strings.Trim(c[:7], "0123456789") == "" {
				short, gen = c[:7], itoa(int64(e["generation"].(float64)))
			}
		}
	}
	if short == "" {
		t.Fatal("no commit of 400 releases starts with 7 decimal digits")
	}
	byGen := bucketops(t, "", "show", "prod/web@"+gen, "--raw").must(t).stdout
	if got := bucketops(t, "", "show", "prod/web@"+short, "--raw").must(t).stdout; got != byGen {
		t.Errorf("show prod/web@%s: %q, want the release at generation %s: %q", short, got, gen, byGen)
	}
	bucketops(t, "", "promote", "prod/web@"+short, "staging/web").must(t)
	if got := bucketops(t, "", "show", "staging/web", "--raw").must(t).stdout; got != byGen {
		t.Errorf("promote prod/web@%s copied %q, want %q", short, got, byGen)
	}
	bucketops(t, "", "rollback", "prod/web", "--to", short).must(t)
	if got := bucketops(t, "", "show", "prod/web", "--raw").must(t).stdout; got != byGen {
		t.Errorf("rollback --to %s made the head %q, want %q", short, got, byGen)
	}

	// Digits that are neither a generation nor a commit's start say both.
	unknown := "9999999"
	for n := 9999998; seen[unknown]; n-- {
		unknown = strconv.Itoa(n)
	}
	for _, args := range [][]string{{"show", "prod/web@" + unknown}, {"rollback", "prod/web", "--to", unknown}} {
		if r := bucketops(t, "", args...); r.code != exitFailure || !strings.Contains(r.stderr, "no release of prod/web is that generation, nor a commit starting with those digits") {
			t.Errorf("%v: exit %d, %s", args, r.code, r.stderr)
		}
	}
}
