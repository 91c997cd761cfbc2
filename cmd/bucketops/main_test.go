package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/bucketops/bucketops/emulator"
)

// startBucket runs the local-mode emulator and points the CLI at it through
// the same environment variables a user sets from the bridge's output.
func startBucket(t *testing.T) *emulator.Emulator {
	t.Helper()
	emu, err := emulator.Start(t.Context(), emulator.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	t.Setenv("BUCKETOPS_BUCKET", "gs://"+emu.Bucket())
	for _, v := range []string{"GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "BUILD_ID", "GITHUB_SHA", "CI_COMMIT_SHA", "GITHUB_STEP_SUMMARY"} {
		t.Setenv(v, "")
	}
	return emu
}

type result struct {
	stdout, stderr string
	code           int
}

func bucketops(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	if err != nil {
		fmt.Fprintln(&errb, "bucketops:", err)
	}
	return result{out.String(), errb.String(), exitCode(err)}
}

func (r result) must(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: pay\ndata:\n  value: %q\n", name, value)
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not the JSON expected: %v\n%s", err, s)
	}
	return v
}

func objectCount(t *testing.T, srv *fakestorage.Server, bucket string) int {
	t.Helper()
	objs, _, err := srv.ListObjects(bucket, "", "", true)
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

func TestPushLogShowRoundTrip(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"b.yaml": configMap("b", "1"), "a/a.yml": configMap("a", "1")})

	first := decode[map[string]any](t, bucketops(t, "", "push", "prod/payments", dir, "--sequence", "10", "--source", "git@abc", "--author", "ci-bot", "-m", "first", "-o", "json").must(t).stdout)
	for _, k := range []string{"app", "generation", "digest", "sequence", "resources", "unchanged"} {
		if _, ok := first[k]; !ok {
			t.Errorf("push -o json lacks %q: %v", k, first)
		}
	}
	if first["app"] != "prod/payments" || first["resources"] != 2.0 || first["sequence"] != 10.0 || first["unchanged"] != false {
		t.Errorf("push -o json: %v", first)
	}

	again := decode[map[string]any](t, bucketops(t, "", "push", "prod/payments", dir, "--sequence", "10", "-o", "json").must(t).stdout)
	if again["unchanged"] != true || again["generation"] != first["generation"] {
		t.Errorf("re-push of the same bytes: %v, want unchanged at generation %v", again, first["generation"])
	}
	if out := bucketops(t, "", "push", "prod/payments", dir).must(t).stdout; !strings.HasPrefix(out, "unchanged prod/payments@") {
		t.Errorf("text re-push says %q, want it to start with 'unchanged'", out)
	}
	// The same bytes from a newer build are a release of their own, so the
	// head records the newer build and an older one can't overwrite it.
	rebuilt := decode[map[string]any](t, bucketops(t, "", "push", "prod/payments", dir, "--sequence", "11", "-o", "json").must(t).stdout)
	if rebuilt["unchanged"] != false || rebuilt["sequence"] != 11.0 || rebuilt["digest"] != first["digest"] {
		t.Errorf("the same bytes at a newer sequence: %v, want a release recording sequence 11", rebuilt)
	}

	dir2 := writeFiles(t, map[string]string{"b.yaml": configMap("b", "2"), "a/a.yml": configMap("a", "1")})
	bucketops(t, "", "push", "prod/payments", dir2, "--sequence", "12", "--author", "ci-bot").must(t)

	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/payments", "-o", "json").must(t).stdout)
	if len(log) != 3 {
		t.Fatalf("log has %d releases, want 3", len(log))
	}
	for _, k := range []string{"generation", "time", "sequence", "source", "author", "message", "digest", "resources", "origin", "kind"} {
		if _, ok := log[2][k]; !ok {
			t.Errorf("log -o json entry lacks %q: %v", k, log[2])
		}
	}
	if log[0]["sequence"] != 12.0 || log[1]["sequence"] != 11.0 || log[2]["sequence"] != 10.0 || log[2]["message"] != "first" || log[2]["source"] != "git@abc" || log[2]["author"] != "ci-bot" {
		t.Errorf("log is not newest first with the recorded fields: %v", log)
	}
	text := bucketops(t, "", "log", "prod/payments").must(t).stdout
	if !strings.Contains(text, "GENERATION") || !strings.Contains(text, "ci-bot") || strings.Count(text, "\n") != 4 {
		t.Errorf("log table:\n%s", text)
	}

	gen := fmt.Sprintf("%.0f", first["generation"])
	raw := bucketops(t, "", "show", "prod/payments@"+gen, "--raw").must(t).stdout
	want := "# Source: a/a.yml\n" + configMap("a", "1") + "---\n# Source: b.yaml\n" + configMap("b", "1")
	if raw != want {
		t.Errorf("show --raw of the first release:\n%s\nwant:\n%s", raw, want)
	}
	shown := bucketops(t, "", "show", "prod/payments").must(t).stdout
	if !strings.Contains(shown, "sequence:   12") || !strings.Contains(shown, `value: "2"`) {
		t.Errorf("show of the head:\n%s", shown)
	}
}

func TestPushFromStdin(t *testing.T) {
	startBucket(t)
	stream := configMap("a", "1") + "---\n" + configMap("b", "1")
	out := decode[map[string]any](t, bucketops(t, stream, "push", "dev/api", "-", "-o", "json").must(t).stdout)
	if out["resources"] != 2.0 {
		t.Errorf("push from stdin: %v", out)
	}
	raw := bucketops(t, "", "show", "dev/api", "--raw").must(t).stdout
	if !strings.HasPrefix(raw, "# Source: stdin\n") {
		t.Errorf("a release from stdin should name stdin as its source:\n%s", raw)
	}
}

func TestExitCodesForStaleAndConflict(t *testing.T) {
	startBucket(t)
	v2 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "2")})
	v1 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	head := decode[map[string]any](t, bucketops(t, "", "push", "prod/api", v2, "--sequence", "2", "-o", "json").must(t).stdout)

	stale := bucketops(t, "", "push", "prod/api", v1, "--sequence", "1")
	if stale.code != exitStale || !strings.Contains(stale.stderr, "stale") {
		t.Errorf("older sequence: exit %d, %s; want 4", stale.code, stale.stderr)
	}
	same := bucketops(t, "", "push", "prod/api", v1, "--sequence", "2")
	if same.code != exitConflict {
		t.Errorf("same sequence, other bytes: exit %d, %s; want 3", same.code, same.stderr)
	}
	strict := bucketops(t, "", "push", "prod/api", v1, "--sequence", "3", "--if-generation", "5")
	if strict.code != exitConflict || !strings.Contains(strict.stderr, "if-generation 5") {
		t.Errorf("strict mode on a wrong generation: exit %d, %s; want 3", strict.code, strict.stderr)
	}
	gen := fmt.Sprintf("%.0f", head["generation"])
	bucketops(t, "", "push", "prod/api", v1, "--sequence", "3", "--if-generation", gen).must(t)
}

func TestBadInputExitsTwoAndWritesNothing(t *testing.T) {
	emu := startBucket(t)
	emu.Server().CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "unversioned"})
	good := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	cases := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"an app escaping its path", []string{"push", "../x", good}, []string{`"../x"`, ".."}},
		{"an app in capitals", []string{"push", "Prod", good}, []string{`"Prod"`, "lowercase"}},
		{"an app with an empty segment", []string{"push", "prod//x", good}, []string{"empty"}},
		{"an app of 513 bytes", []string{"push", strings.Repeat("a", 513), good}, []string{"513 bytes"}},
		{"unparsable YAML", []string{"push", "prod/x", writeFiles(t, map[string]string{"bad.yaml": "a: [1, 2\n"})}, []string{"bad.yaml", "document 1"}},
		{"a document without kind", []string{"push", "prod/x", writeFiles(t, map[string]string{"x.yaml": configMap("a", "1") + "---\napiVersion: v1\nmetadata:\n  name: b\n"})}, []string{"x.yaml", "document 2", "kind"}},
		{"duplicate objects", []string{"push", "prod/x", writeFiles(t, map[string]string{"1.yaml": configMap("a", "1"), "2.yaml": configMap("a", "2")})}, []string{"1.yaml", "2.yaml", "ConfigMap"}},
		{"an empty directory", []string{"push", "prod/x", t.TempDir()}, []string{"no *.yaml, *.yml or *.json files"}},
		{"a missing path", []string{"push", "prod/x", filepath.Join(t.TempDir(), "nope")}, []string{"nope"}},
		{"a bucket that doesn't exist", []string{"push", "prod/x", good, "--bucket", "gs://no-such-bucket"}, []string{"no-such-bucket", "does not exist"}},
		{"a bucket without versioning", []string{"push", "prod/x", good, "--bucket", "gs://unversioned"}, []string{"unversioned", "--versioning"}},
		{"a bucket that isn't a gs:// URL", []string{"push", "prod/x", good, "--bucket", "s3://x"}, []string{"gs://"}},
		{"a missing argument", []string{"push", "prod/x"}, []string{"usage"}},
		{"an unknown flag", []string{"push", "prod/x", good, "--sequnce", "1"}, []string{"sequnce"}},
		{"an unknown output format", []string{"ls", "-o", "yaml"}, []string{"yaml"}},
		{"an unknown command", []string{"pusj", "prod/x", good}, []string{`unknown command "pusj"`}},
		{"a timeout that isn't positive", []string{"push", "prod/x", good, "--timeout", "0s"}, []string{"--timeout"}},
		{"a bucket prefix that isn't a path", []string{"ls", "--bucket", "gs://b/Bad"}, []string{"invalid bucket", "Bad"}},
		{"a duplicate key hiding a second name", []string{"push", "prod/x", writeFiles(t, map[string]string{"d.yaml": configMap("a", "1") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  name: a\n  namespace: pay\n"})}, []string{"d.yaml", "document 2", "name"}},
		{"a bad release reference", []string{"show", "prod/x@abc"}, []string{"prod/x@abc", "generation"}},
		{"a rollback without --to", []string{"rollback", "prod/x"}, []string{"--to"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := bucketops(t, "", c.args...)
			if r.code != exitInvalid {
				t.Errorf("exit %d, want 2; stderr: %s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not mention %q: %s", w, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout is not empty: %q", r.stdout)
			}
		})
	}
	if n := objectCount(t, emu.Server(), emu.Bucket()) + objectCount(t, emu.Server(), "unversioned"); n != 0 {
		t.Errorf("bad input left %d objects in the buckets", n)
	}
	t.Setenv("BUCKETOPS_BUCKET", "")
	if r := bucketops(t, "", "ls"); r.code != exitInvalid || !strings.Contains(r.stderr, "BUCKETOPS_BUCKET") {
		t.Errorf("no bucket configured: exit %d, %s", r.code, r.stderr)
	}
}

func TestPromoteRollbackRetireAndList(t *testing.T) {
	startBucket(t)
	v1 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	v2 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "2"), "extra.yaml": configMap("b", "1")})
	first := decode[map[string]any](t, bucketops(t, "", "push", "staging/api", v1, "--sequence", "1", "-o", "json").must(t).stdout)
	bucketops(t, "", "push", "staging/api", v2, "--sequence", "2").must(t)
	gen := fmt.Sprintf("%.0f", first["generation"])

	promoted := decode[map[string]any](t, bucketops(t, "", "promote", "staging/api", "prod/api", "-o", "json").must(t).stdout)
	if promoted["origin"] == nil || !strings.HasPrefix(promoted["origin"].(string), "staging/api@") || promoted["resources"] != 2.0 {
		t.Errorf("promote: %v", promoted)
	}
	back := decode[map[string]any](t, bucketops(t, "", "rollback", "staging/api", "--to", gen, "-m", "undo", "-o", "json").must(t).stdout)
	if back["origin"] != "staging/api@"+gen || back["digest"] != first["digest"] {
		t.Errorf("rollback: %v, want origin staging/api@%s and the first digest", back, gen)
	}
	if log := bucketops(t, "", "log", "staging/api").must(t).stdout; !strings.Contains(log, "[from staging/api@"+gen+"] undo") {
		t.Errorf("log doesn't show the rollback's origin:\n%s", log)
	}

	diff := bucketops(t, "", "diff", "staging/api@"+gen, "prod/api").must(t).stdout
	for _, w := range []string{"changed ConfigMap pay/a", `-  value: "1"`, `+  value: "2"`, "added ConfigMap pay/b", "1 added, 0 removed, 1 changed, 0 unchanged"} {
		if !strings.Contains(diff, w) {
			t.Errorf("diff lacks %q:\n%s", w, diff)
		}
	}
	d := decode[diffOutput](t, bucketops(t, "", "diff", "prod/api", "staging/api", "-o", "json").must(t).stdout)
	if len(d.Changes) != 2 || d.Changes[1].Change != "removed" {
		t.Errorf("diff -o json: %+v", d)
	}

	retired := bucketops(t, "", "retire", "prod/api", "-m", "gone").must(t).stdout
	if !strings.HasPrefix(retired, "retired prod/api@") {
		t.Errorf("retire says %q", retired)
	}
	ls := decode[[]map[string]any](t, bucketops(t, "", "ls", "-o", "json").must(t).stdout)
	if len(ls) != 2 || ls[0]["app"] != "prod/api" || ls[0]["kind"] != "tombstone" || ls[1]["app"] != "staging/api" {
		t.Errorf("ls: %v", ls)
	}
	if only := decode[[]map[string]any](t, bucketops(t, "", "ls", "staging", "-o", "json").must(t).stdout); len(only) != 1 {
		t.Errorf("ls staging: %v", only)
	}
	if r := bucketops(t, "", "promote", "prod/api", "dev/api"); r.code == 0 {
		t.Errorf("promoting a tombstone succeeded: %s", r.stdout)
	}
}

func TestAuthorDefaultsToTheCIIdentity(t *testing.T) {
	startBucket(t)
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_ACTOR", "octocat")
	t.Setenv("GITHUB_REPOSITORY", "acme/payments")
	t.Setenv("GITHUB_SHA", "0123abc")
	bucketops(t, configMap("a", "1"), "push", "prod/api", "-").must(t)
	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/api", "-o", "json").must(t).stdout)
	if log[0]["author"] != "octocat (github-actions acme/payments)" || log[0]["source"] != "acme/payments@0123abc" {
		t.Errorf("author %q, source %q from the GitHub Actions variables", log[0]["author"], log[0]["source"])
	}
}

func TestVersion(t *testing.T) {
	if out := bucketops(t, "", "version").must(t).stdout; !strings.HasPrefix(out, "bucketops ") {
		t.Errorf("version: %q", out)
	}
}

func TestOneLineKeepsTableRowsShort(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "-",
		"fix\nthe\tbug":         "fix the bug",
		strings.Repeat("é", 60): strings.Repeat("é", 60),
		strings.Repeat("é", 61): strings.Repeat("é", 60) + "…",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTimeoutAgainstABucketThatNeverAnswersNamesTheFlag(t *testing.T) {
	// A GCS that takes connections and never answers, as a paused one does.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(hang.URL, "http://"))
	t.Setenv("BUCKETOPS_BUCKET", "gs://releases")
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	r := bucketops(t, "", "push", "prod/api", dir, "--sequence", "1", "--timeout", "300ms")
	if r.code != exitFailure {
		t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
	}
	msg := strings.TrimSpace(r.stderr)
	if !strings.Contains(msg, "gave up after --timeout 300ms") || strings.Contains(msg, "\n") {
		t.Errorf("want one line naming --timeout, got %q", r.stderr)
	}
}

func TestLogAsOf(t *testing.T) {
	startBucket(t)
	var gens []string
	var times []string
	for i := 1; i <= 3; i++ {
		out := decode[map[string]any](t, bucketops(t, configMap("a", fmt.Sprint(i)), "push", "prod/x", "-", "--sequence", fmt.Sprint(i), "-o", "json").must(t).stdout)
		gens = append(gens, fmt.Sprintf("%.0f", out["generation"]))
		log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/x", "-o", "json", "--limit", "1").must(t).stdout)
		times = append(times, log[0]["time"].(string))
	}
	for i := range gens {
		at, _ := time.Parse(time.RFC3339Nano, times[i])
		got := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/x", "--as-of", at.Add(time.Microsecond).Format(time.RFC3339Nano), "-o", "json").must(t).stdout)
		if len(got) != 1 || fmt.Sprintf("%.0f", got[0]["generation"]) != gens[i] {
			t.Errorf("as of release %d's time: %v, want generation %s", i+1, got, gens[i])
		}
	}
	if r := bucketops(t, "", "log", "prod/x", "--as-of", "2000-01-01"); r.code != exitFailure || !strings.Contains(r.stderr, "no release was published") {
		t.Errorf("as of before the first release: exit %d %s", r.code, r.stderr)
	}
	if r := bucketops(t, "", "log", "prod/x", "--as-of", "last tuesday"); r.code != exitInvalid {
		t.Errorf("a malformed time: exit %d", r.code)
	}
}

func TestPushLabels(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	bucketops(t, "", "push", "prod/payments", dir, "--label", "team=payments", "--label", "example.com/tier=gold").must(t)
	shown := bucketops(t, "", "show", "prod/payments").must(t).stdout
	if !strings.Contains(shown, "labels:     example.com/tier=gold,team=payments") {
		t.Errorf("show doesn't list the labels:\n%s", shown)
	}
	rel := decode[map[string]any](t, bucketops(t, "", "show", "prod/payments", "-o", "json").must(t).stdout)
	if fmt.Sprint(rel["labels"]) != "map[example.com/tier:gold team:payments]" {
		t.Errorf("show -o json labels: %v", rel["labels"])
	}

	r := bucketops(t, "", "push", "prod/payments", dir, "--label", "team=pay ments")
	if r.code != 2 || !strings.Contains(r.stderr, `--label: invalid label team="pay ments"`) {
		t.Errorf("invalid label: exit %d, stderr %q; want exit 2 naming the label", r.code, r.stderr)
	}
	if n := len(decode[[]map[string]any](t, bucketops(t, "", "log", "prod/payments", "-o", "json").must(t).stdout)); n != 1 {
		t.Errorf("%d releases after a refused push, want 1", n)
	}
}

func TestVersionFlagAndMistypedCommands(t *testing.T) {
	if out := bucketops(t, "", "--version").must(t).stdout; !strings.HasPrefix(out, "bucketops "+version+" (go") {
		t.Errorf("--version: %q", out)
	}
	r := bucketops(t, "", "pussh", "dev/web", ".")
	if r.code != exitInvalid || !strings.Contains(r.stderr, `unknown command "pussh": did you mean push?`) {
		t.Errorf("a mistyped push: exit %d, %q; want exit %d and a suggestion", r.code, r.stderr, exitInvalid)
	}
	if r := bucketops(t, "", "frobnicate"); r.code != exitInvalid || strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, "--help") {
		t.Errorf("an unknown command: exit %d, %q", r.code, r.stderr)
	}
}

// TestShellCompletionCompletesAppNames runs what the shell's completion
// script runs: the apps of the bucket, under the directory typed so far.
func TestShellCompletionCompletesAppNames(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	for _, app := range []string{"prod/payments", "prod/web", "dev/web"} {
		bucketops(t, "", "push", app, dir, "-m", "first of "+app).must(t)
	}
	out := bucketops(t, "", "__complete", "show", "prod/").must(t).stdout
	if !strings.Contains(out, "prod/payments\tfirst of prod/payments\n") || !strings.Contains(out, "prod/web\t") || strings.Contains(out, "dev/web") {
		t.Errorf("completing show prod/:\n%s", out)
	}
	out = bucketops(t, "", "__complete", "log", "prod/p").must(t).stdout
	if !strings.Contains(out, "prod/payments") || strings.Contains(out, "prod/web") {
		t.Errorf("completing log prod/p:\n%s", out)
	}
}

// TestLsFitsEightyColumns: ls's table fits a terminal of 80 columns
// whatever the messages, authors and sources hold; -o wide has them all.
func TestLsFitsEightyColumns(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	long := strings.Repeat("a long commit message that goes on ", 5)
	for _, app := range []string{"prod/payments", "prod/web", "staging/payments-gateway"} {
		bucketops(t, "", "push", app, dir, "-m", long, "--author", "Release Bot <release-bot@acme.example.com>", "--source", "https://github.com/acme/payments/commit/0123456789abcdef0123456789abcdef01234567").must(t)
	}
	out := bucketops(t, "", "ls").must(t).stdout
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "APP") || !strings.Contains(lines[3], "staging/payments-gateway") {
		t.Fatalf("ls:\n%s", out)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if !strings.Contains(lines[1], "a long commit") || !strings.HasSuffix(lines[1], "…") {
		t.Errorf("the message is not shown, cut to fit: %q", lines[1])
	}
	wide := bucketops(t, "", "ls", "-o", "wide").must(t).stdout
	if !strings.Contains(wide, "AUTHOR") || !strings.Contains(wide, "release-bot@acme.example.com") {
		t.Errorf("ls -o wide:\n%s", wide)
	}
}
