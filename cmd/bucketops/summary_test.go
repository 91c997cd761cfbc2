package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/render"
)

func readSummary(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// TestPushSummaryRowsWhateverTheOutcome: every push that got as far as its
// app leaves one row, under one header, published or not.
func TestPushSummaryRowsWhateverTheOutcome(t *testing.T) {
	startBucket(t)
	sum := filepath.Join(t.TempDir(), "summary.md")
	v1 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	v2 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "2")})
	bad := writeFiles(t, map[string]string{"cm.yaml": "kind: ConfigMap\n"})
	digest := func(dir string) string {
		rel, err := render.AssembleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return "`" + rel.Digest + "`"
	}
	first := decode[publishOutput](t, bucketops(t, "", "push", "prod/api", v2, "--sequence", "2", "--summary", sum, "-o", "json").must(t).stdout)
	gen := fmt.Sprint(first.Generation)

	for _, step := range []struct {
		args []string
		code int
	}{
		{[]string{"push", "prod/api", v2, "--sequence", "2"}, 0},
		{[]string{"push", "prod/api", v1, "--sequence", "1"}, exitStale},
		{[]string{"push", "prod/api", v1, "--sequence", "2"}, exitConflict},
		{[]string{"push", "prod/api", bad, "--sequence", "3"}, exitInvalid},
		{[]string{"push", "Prod|API", v1}, exitInvalid},
	} {
		if r := bucketops(t, "", append(step.args, "--summary", sum)...); r.code != step.code {
			t.Fatalf("%q: exit %d, want %d: %s", step.args, r.code, step.code, r.stderr)
		}
	}
	want := []string{
		"| App | Generation | Digest | Status |",
		"|---|---|---|---|",
		"| prod/api | " + gen + " | " + digest(v2) + " | published |",
		"| prod/api | " + gen + " | " + digest(v2) + " | unchanged |",
		"| prod/api | - | " + digest(v1) + " | stale |",
		"| prod/api | - | " + digest(v1) + " | conflict |",
		"| prod/api | - | - | invalid |",
		`| Prod\|API | - | - | invalid |`,
	}
	if got := readSummary(t, sum); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPushSummaryFileAndDefault(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})

	t.Run("GITHUB_STEP_SUMMARY is the default and --summary '' turns it off", func(t *testing.T) {
		sum := filepath.Join(t.TempDir(), "step_summary")
		t.Setenv("GITHUB_STEP_SUMMARY", sum)
		bucketops(t, "", "push", "dev/a", dir).must(t)
		bucketops(t, "", "push", "dev/a", dir, "--summary", "").must(t)
		if got := readSummary(t, sum); len(got) != 3 || !strings.HasSuffix(got[2], "| published |") {
			t.Errorf("summary: %q, want a header and one row", got)
		}
	})
	t.Run("a file with other text gets a table of its own", func(t *testing.T) {
		sum := filepath.Join(t.TempDir(), "summary.md")
		os.WriteFile(sum, []byte("## Deploy\n\nbuilt by job 7\n"), 0o644)
		bucketops(t, "", "push", "dev/b", dir, "--summary", sum).must(t)
		got := readSummary(t, sum)
		if len(got) != 7 || got[3] != "" || got[4] != "| App | Generation | Digest | Status |" {
			t.Errorf("summary: %q, want the text, a blank line, the header and a row", got)
		}
	})
	t.Run("a summary that can't be written is a usage error and nothing is published", func(t *testing.T) {
		r := bucketops(t, "", "push", "dev/c", dir, "--summary", filepath.Join(t.TempDir(), "missing", "summary.md"))
		if r.code != exitInvalid || !strings.Contains(r.stderr, "--summary") {
			t.Errorf("exit %d, %s; want 2 naming --summary", r.code, r.stderr)
		}
		if ls := bucketops(t, "", "ls").must(t); strings.Contains(ls.stdout, "dev/c") {
			t.Error("published although the summary can't be written")
		}
	})
	t.Run("a bucket that doesn't answer is a failed row", func(t *testing.T) {
		sum := filepath.Join(t.TempDir(), "summary.md")
		t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1")
		if r := bucketops(t, "", "push", "dev/d", dir, "--summary", sum, "--timeout", "1s"); r.code != exitFailure {
			t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
		}
		if got := readSummary(t, sum); len(got) != 3 || !strings.HasSuffix(got[2], "| failed |") {
			t.Errorf("summary: %q", got)
		}
	})
}

func TestPushWaitSummary(t *testing.T) {
	rig := startDeployRig(t)
	sum := filepath.Join(t.TempDir(), "summary.md")
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "30s", "--summary", sum).must(t)

	rig.argo.OnSync(func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
		now := metav1.Now()
		a.Status.OperationState = &v1alpha1.OperationState{Phase: synccommon.OperationFailed, StartedAt: now, FinishedAt: &now, Message: "one or more objects failed to apply"}
		return nil
	})
	dir = writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "2")})
	if r := bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "30s", "--summary", sum); r.code != exitNotDeployed {
		t.Fatalf("exit %d, want 5: %s", r.code, r.stderr)
	}
	got := readSummary(t, sum)
	if len(got) != 4 || !strings.HasSuffix(got[2], "| published, deployed |") || !strings.HasSuffix(got[3], "| published, not deployed |") {
		t.Errorf("summary:\n%s", strings.Join(got, "\n"))
	}
}
