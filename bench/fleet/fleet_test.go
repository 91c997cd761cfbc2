package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() Report {
	s := time.Second
	return Report{
		Apps: 200, Objects: 10, Bursts: 3, Stream: 5 * time.Minute, CPUs: 2, Date: "2026-12-04", Took: 40 * time.Minute,
		Feeds: []Feed{
			{Name: Git, Bursts: []Burst{{Live: 90 * s, Generations: 200}, {Live: 100 * s, Generations: 200}, {Live: 300 * s, Generations: 400}}},
			{Name: GitPaths, Bursts: []Burst{{Live: 80 * s, Generations: 200}}},
			{Name: Bucket, Bursts: []Burst{{Live: 20 * s, Generations: 200, CPU: 40}, {Live: 10 * s, Generations: 200, CPU: 20}, {Live: 15 * s, Generations: 200, CPU: 30}},
				Stream: &Stream{Releases: 4, Latencies: []time.Duration{2 * s, 3 * s, 4 * s, 12 * s}, Publish: []time.Duration{100 * time.Millisecond}, Generations: 4, CPU: 2}},
		},
	}
}

func TestRender(t *testing.T) {
	r := sampleReport()
	if got := r.Ratios()[Git]; got < 6.66 || got > 6.67 {
		t.Errorf("ratio against git %.3f, want 100 s / 15 s (medians)", got)
	}
	out := Render(r, "bench-argocd.svg")
	for _, want := range []string{
		"| git monorepo | 1.7 min |",                   // median of 90, 100, 300 s
		"| bucketops | 15.0 s | 0 ms | 1.00 | 0.150 |", // median CPU 30 s over 200 apps
		"**6.7×** as soon as the git monorepo (goal ≥ 5×: met)",
		"**5.3×** against the monorepo with `manifest-generate-paths`",
		"(goal exactly 1 in every burst: met)",
		"Stream p99 publish to Synced: 12.0 s, 0 of 4 releases not live (goal p99 < 10 s: **not met**)",
		"![fleet race](bench-argocd.svg)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the section lacks %q:\n%s", want, out)
		}
	}
	if Render(r, "x.svg") != Render(r, "x.svg") || string(Chart(r)) != string(Chart(r)) {
		t.Error("rendering is not deterministic")
	}
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
	r.Feeds[0].Stream = &Stream{Releases: 2, Latencies: []time.Duration{time.Minute, 2 * time.Minute}, Generations: 12, CPU: 3}
	out := Readme(r, "docs/benchmarks.md#fleet")
	section := Render(r, "x.svg")
	for _, want := range []string{
		"fleet of 200 apps (2026-12-04, one 2-core machine, [`make bench-argocd`](docs/benchmarks.md#fleet))",
		"went live in 15.0 s with bucketops against 1.7 min for a git monorepo (**6.7×** as soon; 1.3 min with `manifest-generate-paths`, median of 3)",
		"took 3.0 s from publish to Synced at the median with bucketops against 1.0 min",
		"**1.0 manifest generations per release** against 6.0, and 0.50 CPU seconds of Argo CD per release against 1.50",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the README paragraph lacks %q:\n%s", want, out)
		}
	}
	// The figures are the section's: the same medians and ratio.
	for _, fig := range []string{"| bucketops | 15.0 s |", "| git monorepo | 1.7 min |", "**6.7×** as soon as the git monorepo"} {
		if !strings.Contains(section, fig) {
			t.Errorf("the section lacks %q, which the README states:\n%s", fig, section)
		}
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
