package fleet

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cost is a Cost whose CPU went to the application controller (ctl),
// the repo-server, the feed's server and the API server.
func cost(gens int, ctl, repo, srv, api float64, feed string) Cost {
	return Cost{Generations: gens, CPU: ctl + repo + srv + api, Processes: map[string]float64{
		controller: ctl, "argocd-repo-server": repo, server(feed): srv, "kube-apiserver": api, CIProcess: 1,
	}}
}

func sampleReport() Report {
	s := time.Second
	return Report{
		Apps: 200, Objects: 10, Bursts: 3, Stream: 5 * time.Minute, CPUs: 2, Date: "2026-12-04", Took: 40 * time.Minute,
		ArgoCD: "v3.6.2", Reconciliation: "120s", Levers: []string{"sync-first", "basic-auth"},
		Feeds: []Feed{
			{Name: Git, Bursts: []Burst{{Live: 90 * s, Cost: cost(200, 40, 40, 10, 10, Git)}, {Live: 100 * s, Cost: cost(200, 40, 40, 10, 10, Git)}, {Live: 300 * s, Cost: cost(400, 80, 80, 20, 20, Git)}},
				Stream: &Stream{Releases: 4, Latencies: []time.Duration{40 * s, 50 * s, 60 * s, 70 * s}, Cost: cost(24, 2, 2, 0.4, 1, Git)}},
			{Name: GitPaths, Bursts: []Burst{{Live: 80 * s, Cost: cost(200, 40, 40, 10, 10, GitPaths)}}},
			{Name: Bucket, Bursts: []Burst{{Live: 20 * s, Cost: cost(200, 20, 10, 10, 10, Bucket)}, {Live: 10 * s, Cost: cost(200, 10, 5, 5, 5, Bucket)}, {Live: 15 * s, Cost: cost(200, 15, 7.5, 7.5, 7.5, Bucket)}},
				Stream: &Stream{Releases: 4, Latencies: []time.Duration{2 * s, 3 * s, 4 * s, 12 * s}, Publish: []time.Duration{100 * time.Millisecond}, Cost: cost(4, 1, 0.4, 0.2, 0.4, Bucket)}},
		},
	}
}

// contains reports each of wants that text lacks, with msg, a format of
// the missing string, and the text.
func contains(t *testing.T, text, msg string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf(msg+":\n%s", want, text)
		}
	}
}

func TestRender(t *testing.T) {
	r := sampleReport()
	if got := r.Ratios()[Git]; got < 6.66 || got > 6.67 {
		t.Errorf("ratio against git %.3f, want 100 s / 15 s (medians)", got)
	}
	out := Render(r, "bench-argocd.svg")
	contains(t, out, "the section lacks %q",
		"real Argo CD v3.6.2", "every 120s", "levers on: sync-first, basic-auth",
		"The feeds ran in turn",      // the sample predates interleaving
		"| git monorepo | 1.7 min |", // median of 90, 100, 300 s
		// bucketops' median burst: controller 15 + repo-server 7.5 + bridge 7.5 = 30 s of Argo CD + server, 37.5 s in all, over 200 apps.
		"| bucketops | 15.0 s | 0 ms | 1.00 | 0.150 | 0.188 | 0.0 | 0 (0) |",
		// The stream: 1.6 s of Argo CD + bridge over 4 releases, 2.0 with the API server.
		"| bucketops | 4 | 3.0 s | 12.0 s | 0 | 1.00 | 0.400 | 0.500 |",
		"| argocd-application-controller | 0.200 |", // the git monorepo's median burst, per app
		"| CI (publishing) |",
		"**The floor**", "0.113 CPU s per app", // bucketops' controller 15 + API server 7.5 over 200
		"Stream, publish to Synced p99 < 10 s, nothing left behind, exactly 1 generation per release: p99 12.0 s, 0 of 4 releases not live, 1.00 generations per release: **not met**",
		// 1.6 / 4 = 0.4 against the monorepo's (2 + 2 + 0.4) / 4 = 1.1.
		"**0.36×**: met",
		"**5.3×** as soon (15.0 s against 1.3 min), at **0.33×** its Argo CD + server CPU, 1.00 generations per app: met",
		"![fleet race](bench-argocd.svg)",
	)
	if Render(r, "x.svg") != Render(r, "x.svg") || string(Chart(r)) != string(Chart(r)) {
		t.Error("rendering is not deterministic")
	}
}

// An interleaved race says how it ran, and how much of each feed's burst
// went to comparing the other feeds' idle apps; a race with no-validate
// says it wasn't the install's.
func TestRenderInterleaved(t *testing.T) {
	r := sampleReport()
	r.Interleaved = true
	r.Levers = append(r.Levers, NoValidate)
	for i, idle := range [][]int{{300, 100, 200}, {50}, {400, 600, 500}} {
		for j := range r.Feeds[i].Bursts {
			r.Feeds[i].Bursts[j].IdleReconciles = idle[j]
		}
	}
	out := Render(r, "bench-argocd.svg")
	contains(t, out, "the section lacks %q",
		"in an order rotated by one each round",
		"deployed again alone for its stream",
		"levers on: sync-first, basic-auth (docs/argocd.md). Besides the install, every feed's Applications had Argo CD's `Validate=false`",
		"(median): git monorepo 200, git monorepo, manifest-generate-paths 50, bucketops 500.",
	)
	if strings.Contains(out, "The feeds ran in turn") {
		t.Error("an interleaved race described as run in turn")
	}
}

// A race that let the stack come to rest before each stream says how
// long that took and from what load, and says so when the limit passed
// first; a report from before it measured that says nothing of it.
func TestRenderRests(t *testing.T) {
	r := sampleReport()
	if out := Render(r, "x.svg"); strings.Contains(out, "come to rest") {
		t.Errorf("a report without rests tells of them:\n%s", out)
	}
	r.Feeds[0].Stream.Rest = &Rest{Wait: 45 * time.Second, First: 1.52, Last: 0.31, Busiest: "argocd-application-controller", BusiestCores: 1.1, Settled: true}
	r.Feeds[2].Stream.Rest = &Rest{Wait: 5 * time.Minute, First: 1.9, Last: 1.4, Busiest: "argocd-repo-server", BusiestCores: 0.8}
	contains(t, Render(r, "x.svg"), "the section lacks %q",
		"git monorepo came to rest after 45.0 s, from 1.52 cores to 0.31 (at first the busiest: argocd-application-controller, 1.10)",
		"bucketops had not come to rest after 5.0 min, from 1.90 cores to 1.40 (at first the busiest: argocd-repo-server, 0.80)",
	)
	if out := Render(r, "x.svg"); strings.Contains(out, "saturated") {
		t.Errorf("a stack resting at 1.40 of %d cores is called saturated:\n%s", r.CPUs, out)
	}
}

// The stack is at rest once its load stops falling, unless it holds most
// of the machine: a flat load there is a backlog still draining.
func TestAtRest(t *testing.T) {
	for _, c := range []struct {
		name            string
		cores, quietest float64
		want            bool
	}{
		{"the first window", 0.4, math.Inf(1), false},
		{"still falling", 1.2, 1.6, false},
		{"flat and low", 0.42, 0.42, true},
		{"a little up from the quietest", 0.5, 0.42, true},
		{"flat at most of the machine", 1.87, 1.89, false},
		{"just under saturation", 1.49, 1.5, true},
	} {
		if got := AtRest(c.cores, c.quietest, 0.1, 2); got != c.want {
			t.Errorf("%s: AtRest(%.2f after %.2f, 2 cores) = %v", c.name, c.cores, c.quietest, got)
		}
	}
}

// A stack that rests at most of the machine's cores (a slow or busy
// machine, seen on 2026-12-07 at 1.94 of 2) is named, so that nobody reads
// its times as the feeds'.
func TestRenderRestsSaturated(t *testing.T) {
	r := sampleReport()
	r.Feeds[2].Stream.Rest = &Rest{Wait: 30 * time.Second, First: 1.96, Last: 1.94, Busiest: "argocd-application-controller", BusiestCores: 1.5, Settled: true}
	contains(t, Render(r, "x.svg"), "the section lacks %q",
		"**The machine was saturated at rest**",
		"1.94 cores before the bucketops stream, at least 75% of the machine's 2 cores",
	)
}

func TestPercentileAndMedian(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if Percentile(ds, 50) != 3 || Percentile(ds, 99) != 5 || Percentile(ds, 1) != 1 || Percentile(nil, 50) != 0 {
		t.Errorf("percentiles %v %v %v", Percentile(ds, 50), Percentile(ds, 99), Percentile(ds, 1))
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Error("median of an even count")
	}
}

func TestWriteKeepsHandWrittenText(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "benchmarks.md")
	os.WriteFile(doc, []byte("# Benchmarks\n\nby hand\n\n<!-- bench-argocd:begin -->\nOLD FIGURES\n<!-- bench-argocd:end -->\n\nafter\n"), 0o644)
	if err := Write(sampleReport(), doc, filepath.Join(dir, "chart.svg"), "chart.svg"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	if !strings.HasPrefix(string(got), "# Benchmarks\n\nby hand\n\n<!-- bench-argocd:begin -->\n## A fleet") || !strings.HasSuffix(string(got), "<!-- bench-argocd:end -->\n\nafter\n") || strings.Contains(string(got), "OLD FIGURES") {
		t.Errorf("doc:\n%s", got)
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "chart.svg")); !strings.HasPrefix(string(svg), "<svg") {
		t.Error("no chart written")
	}
}

func TestReadmeIsTheReportsFigures(t *testing.T) {
	r := sampleReport()
	r.Feeds[0].Stream = &Stream{Releases: 2, Latencies: []time.Duration{time.Minute, 2 * time.Minute}, Cost: cost(12, 1, 1, 1, 5, Git)}
	out := Readme(r, "docs/benchmarks.md#fleet")
	section := Render(r, "x.svg")
	contains(t, out, "the README paragraph lacks %q",
		"real Argo CD v3.6.2 with a fleet of 200 apps (2026-12-04, one 2-core machine, [`make bench-argocd`](docs/benchmarks.md#fleet))",
		"went live in 15.0 s with bucketops against 1.7 min for a git monorepo (**6.7×** as soon; 1.3 min with `manifest-generate-paths`, median of 3)",
		"took 3.0 s from publish to Synced at the median with bucketops against 1.0 min",
		"**1.0 manifest generations per release** against 6.0, and 0.40 CPU seconds of Argo CD and the bridge per release against 1.50 of Argo CD and the git server",
	)
	// The figures are the section's: the same medians and ratio.
	contains(t, section, "the section lacks %q, which the README states", "| bucketops | 15.0 s |", "| git monorepo | 1.7 min |", "| git monorepo, manifest-generate-paths | 1.3 min |")
	// With the paths monorepo's stream, its latency is stated beside the
	// plain monorepo's.
	r.Feeds[1].Stream = &Stream{Releases: 2, Latencies: []time.Duration{4 * time.Second, 5 * time.Second}, Cost: cost(2, 1, 1, 1, 1, GitPaths)}
	if out := Readme(r, "x"); !strings.Contains(out, "against 1.0 min (4.0 s with `manifest-generate-paths`), with") {
		t.Errorf("the README paragraph lacks the paths monorepo's stream:\n%s", out)
	}
	// A burst bucketops lost says so, not "0.9× as soon".
	slow := sampleReport()
	slow.Feeds[0].Bursts = []Burst{{Live: 100 * time.Second}}
	slow.Feeds[2].Bursts = []Burst{{Live: 108 * time.Second}}
	if out := Readme(slow, "x"); !strings.Contains(out, "went live in 1.8 min with bucketops against 1.7 min for a git monorepo (**8% later**;") {
		t.Errorf("a lost burst, as the README tells it:\n%s", out)
	}
	if Readme(Report{Feeds: []Feed{{Name: Bucket}}}, "x") != "" {
		t.Error("a run without both feeds' bursts gave a README paragraph")
	}
}

func TestWriteReadmeKeepsHandWrittenText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	os.WriteFile(path, []byte("# bucketops\n\n<!-- bench-argocd-readme:begin -->\nOLD\n<!-- bench-argocd-readme:end -->\n\n## Quick start\n"), 0o644)
	if err := WriteReadme(sampleReport(), path, "docs/benchmarks.md"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(got), "# bucketops\n\n<!-- bench-argocd-readme:begin -->\nOn a real Argo CD") || !strings.HasSuffix(string(got), "<!-- bench-argocd-readme:end -->\n\n## Quick start\n") || strings.Contains(string(got), "OLD") {
		t.Errorf("README:\n%s", got)
	}
}

func TestRenderLevers(t *testing.T) {
	none, one := sampleReport(), sampleReport()
	none.Levers = nil
	one.Levers = []string{"sync-first"}
	one.Feeds[2].Bursts = []Burst{{Live: 5 * time.Second, Cost: cost(200, 5, 2, 1, 1, Bucket)}}
	out := RenderLevers([]Report{none, one})
	contains(t, out, "the levers table lacks %q",
		"| none | 15.0 s | 1.00 | 0.150 | 0 (0) | 3.0 s | 12.0 s | 1.00 | 0.400 |",
		"| sync-first | 5.0 s | 1.00 | 0.040 |",
	)
}
