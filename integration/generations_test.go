//go:build e2e

package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestOneGenerationPerRelease is the fleet race's extra generations,
// reproduced on one Application: a release synced by the bridge
// (sync-first) to an Application whose last comparison is older than
// timeout.reconciliation. The sync's write to the Application makes the
// controller start a comparison of its own ("comparison expired") beside
// the sync's, and the repo-server, which lets generations of one revision
// run together, generated the release twice. With generate-first the
// bridge has Argo CD generate it before the sync, and both comparisons
// read it from the cache: one generation per release.
func TestOneGenerationPerRelease(t *testing.T) {
	if !stackLevers.syncFirst {
		t.Skip("the bridge refreshes instead of syncing (BENCH_ARGOCD_LEVERS without sync-first)")
	}
	const name, app, ns = "onegen", "prod/onegen", "onegen"
	createAutomatedApplication(t, name, app, ns)
	if out, code := push(t, app, release(t, ns, "r0", "")); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	expiry, err := time.ParseDuration(reconciliation())
	if err != nil {
		t.Fatal(err)
	}
	// Argo CD compares every Application every timeout.reconciliation,
	// delayed by up to its jitter (60 s by default): between the two, the
	// last comparison is older than the timeout. A release published then
	// is the reproduction; one published after the timer's comparison
	// isn't, and the next release tries again.
	for attempt := 1; ; attempt++ {
		waitComparisonOlderThan(t, name, expiry+time.Second, 4*expiry)
		repo, controller := logLength(t, "argocd-repo-server"), logLength(t, "argocd-application-controller")
		value := fmt.Sprintf("r%d", attempt)
		if out, code := push(t, app, release(t, ns, value, "")); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		eventually(t, "the release live", 60*time.Second, hasValue(t, ns, value))
		// A comparison beside the sync's ends within a few seconds of it.
		time.Sleep(5 * time.Second)
		if countLog(t, "argocd-application-controller", controller, func(l string) bool { return isExpiredComparison(l, name) }) == 0 {
			if attempt == 3 {
				t.Fatalf("3 releases, and Argo CD's timer compared %s before each: the reproduction never happened", name)
			}
			t.Logf("release %s: the timer compared %s first; again", value, name)
			continue
		}
		if n := countLog(t, "argocd-repo-server", repo, func(l string) bool { return isGeneration(l, name) }); n != 1 {
			t.Errorf("release %s, synced beside an expired comparison: %d manifest generations, want 1", value, n)
		}
		return
	}
}

// waitComparisonOlderThan waits until the Application's last comparison
// (status.reconciledAt) is older than age.
func waitComparisonOlderThan(t *testing.T, name string, age, timeout time.Duration) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s's last comparison older than %s", name, age), timeout, func() (bool, string) {
		a, err := st.kube.application(name)
		if err != nil {
			return false, err.Error()
		}
		at, err := time.Parse(time.RFC3339, a.Status.ReconciledAt)
		if err != nil {
			return false, fmt.Sprintf("reconciledAt %q: %v", a.Status.ReconciledAt, err)
		}
		return time.Since(at) > age, "reconciledAt " + a.Status.ReconciledAt
	})
}

// logOf is the log file of the stack's running process name.
func logOf(t *testing.T, name string) string {
	t.Helper()
	for _, p := range st.running() {
		if p.name == name {
			return p.log
		}
	}
	t.Fatalf("no %s running", name)
	return ""
}

// logLength is how long process name's log is now: where countLog
// starts.
func logLength(t *testing.T, name string) int64 {
	t.Helper()
	fi, err := os.Stat(logOf(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// countLog counts the lines of process name's log after offset from that
// match.
func countLog(t *testing.T, name string, from int64, match func(string) bool) int {
	t.Helper()
	data, err := os.ReadFile(logOf(t, name))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(string(data[min(from, int64(len(data))):]), "\n") {
		if match(line) {
			n++
		}
	}
	return n
}
