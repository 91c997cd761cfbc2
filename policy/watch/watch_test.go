package watch_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bucketops/bucketops/policy/watch"
)

func TestWatcherKeepsThePreviousPolicyWhenTheFileBreaks(t *testing.T) {
	name := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n  - {prefix: a, projects: [a], namespaces: [a]}\n")
	reg := prometheus.NewRegistry()
	w, err := watch.Tenancy(name, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	first := w.Current()
	if _, ok := first.RuleFor("a/x"); !ok {
		t.Fatal("the first policy has no rule for a/x")
	}
	if changed, err := w.Reload(); changed || err != nil {
		t.Errorf("reload of an unchanged file: changed=%v %v", changed, err)
	}
	write("rules:\n  - {prefix: a, projects: [a]\n")
	if _, err := w.Reload(); err == nil {
		t.Error("a broken file reloaded without error")
	}
	if w.Current() != first {
		t.Error("a broken file replaced the policy in force")
	}
	write("rules:\n  - {prefix: b, projects: [b], namespaces: [b]}\n")
	if changed, err := w.Reload(); !changed || err != nil {
		t.Fatalf("reload of a fixed file: changed=%v %v", changed, err)
	}
	if _, ok := w.Current().RuleFor("b/x"); !ok {
		t.Error("the new policy is not in force")
	}
	want := "# HELP bucketops_policy_reloads_total Reads of a policy file after it changed, by result (ok, or error: the previous policy stays in force).\n# TYPE bucketops_policy_reloads_total counter\nbucketops_policy_reloads_total{policy=\"tenancy\",result=\"error\"} 1\nbucketops_policy_reloads_total{policy=\"tenancy\",result=\"ok\"} 1\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bucketops_policy_reloads_total"); err != nil {
		t.Error(err)
	}
	os.Remove(name)
	if _, err := watch.Tenancy(name, slog.New(slog.DiscardHandler), prometheus.NewRegistry()); err == nil {
		t.Error("a bridge started without its policy file")
	}
}
