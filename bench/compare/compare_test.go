package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/store"
)

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the git contenders need the git command line")
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, n := range v {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"no samples give zero", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"the median of an odd count is the middle one, unsorted input", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"the median of an even count is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100 samples is the 99th", ms(seq(100)...), 99, 99 * time.Millisecond},
		{"p99 of 20 samples is the slowest", ms(seq(20)...), 99, 20 * time.Millisecond},
		{"p100 is the slowest", ms(3, 9, 1), 100, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tt.in...)
			if got := percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.in, tt.p, got, tt.want)
			}
			if !slicesEqual(in, tt.in) {
				t.Errorf("percentile sorted its input: %v", tt.in)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func slicesEqual(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReplaceSection(t *testing.T) {
	const section = "## bucketops against git\n\nnew figures\n"
	block := beginMarker + "\n" + section + endMarker + "\n"
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr bool
	}{
		{
			name: "the text between the markers is replaced and the rest kept",
			doc:  "# Benchmarks\n\nby hand\n\n" + beginMarker + "\nold figures\n" + endMarker + "\n\n## Load across containers\n\nby hand too\n",
			want: "# Benchmarks\n\nby hand\n\n" + block + "\n## Load across containers\n\nby hand too\n",
		},
		{
			name: "markers at the very end of a file without a final newline",
			doc:  "# Benchmarks\n" + beginMarker + "\nold\n" + endMarker,
			want: "# Benchmarks\n" + block,
		},
		{
			name: "without markers the section is appended",
			doc:  "# Benchmarks\n\nby hand\n",
			want: "# Benchmarks\n\nby hand\n\n" + block,
		},
		{
			name: "an empty doc gets the section alone",
			doc:  "",
			want: block,
		},
		{name: "only the begin marker is an error", doc: "x\n" + beginMarker + "\nhand-written\n", wantErr: true},
		{name: "only the end marker is an error", doc: "x\n" + endMarker + "\nhand-written\n", wantErr: true},
		{name: "markers out of order are an error", doc: endMarker + "\nx\n" + beginMarker + "\n", wantErr: true},
		{name: "two sections are an error", doc: beginMarker + "\n" + endMarker + "\n" + beginMarker + "\n" + endMarker + "\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := replaceSection([]byte(tt.doc), []byte(section))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error; got\n%s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			again, err := replaceSection(got, []byte(section))
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("a second replacement changed the doc: %v\n%q", err, again)
			}
		})
	}
}

func TestUpdateDocLeavesADocWithOneMarkerAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	doc := "# Benchmarks\n" + beginMarker + "\nhand-written, end marker lost\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err := updateDoc(path, "new\n")
	if err == nil || !strings.Contains(err.Error(), endMarker) {
		t.Fatalf("updateDoc = %v, want an error naming the markers", err)
	}
	if got, _ := os.ReadFile(path); string(got) != doc {
		t.Errorf("the doc changed:\n%s", got)
	}
}

func TestManifestChangesAFewLinesPerRelease(t *testing.T) {
	const size = 50 * 1024
	a, b := manifest("prod/big", 41, size), manifest("prod/big", 42, size)
	if len(a) > size || len(a) < size-64 {
		t.Errorf("len = %d, want about %d", len(a), size)
	}
	if !bytes.Equal(a, manifest("prod/big", 41, size)) {
		t.Error("manifest is not deterministic")
	}
	if s, ok := manifestSeq(b); !ok || s != 42 {
		t.Errorf("manifestSeq = %d, %v; want 42", s, ok)
	}
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	if len(la) != len(lb) {
		t.Fatalf("line counts differ: %d, %d", len(la), len(lb))
	}
	changed := 0
	for i := range la {
		if la[i] != lb[i] {
			changed++
		}
	}
	// Sequence header, build annotation, image tag, and some values.
	if changed < 4 || changed > 30 {
		t.Errorf("%d lines changed between releases, want a handful", changed)
	}
	if bytes.Equal(manifest("prod/a", 1, 4096)[40:], manifest("prod/b", 1, 4096)[40:]) {
		t.Error("two apps have the same release")
	}
}

func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	_, err := parseFlags([]string{"-contenders", "bucketops,svn", "-releases", "0", "-history", "10,x"}, io.Discard)
	if !errors.Is(err, errUsage) {
		t.Fatalf("err = %v, want errUsage", err)
	}
	for _, want := range []string{`"svn"`, "-releases", `"x"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q doesn't mention %s", err, want)
		}
	}
}

// TestRunWritesTheSectionAndChart runs every contender through every
// workload at tiny sizes: run fails when any correctness check fails.
func TestRunWritesTheSectionAndChart(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "docs", "benchmarks.md")
	chart := filepath.Join(dir, "docs", "bench-compare.svg")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	hand := "# Benchmarks\n\nby hand\n\n" + beginMarker + "\nold\n" + endMarker + "\n\n## Load across containers\n\nby hand too\n"
	if err := os.WriteFile(doc, []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# bucketops\n\n<!-- bench-compare-readme:begin -->\nold figures\n<!-- bench-compare-readme:end -->\n\n## Quick start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := run(t.Context(), []string{
		"-doc", doc, "-chart", chart, "-readme", readme,
		"-history", "0,5", "-history-releases", "2",
		"-writers", "2", "-same-app", "2", "-releases", "2", "-concurrency-history", "5",
		"-size-releases", "2", "-app-bytes", "8192",
	}, io.Discard, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(got)
	for _, want := range []string{
		"# Benchmarks\n\nby hand\n\n" + beginMarker + "\n## bucketops against git\n",
		endMarker + "\n\n## Load across containers\n\nby hand too\n",
		"](bench-compare.svg)",
		"Every check passed",
		"### Headline",
		"| 2 writers, one app | git: kept working copy |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the doc lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "old\n") {
		t.Error("the old section is still there")
	}
	checkReadmeMatchesDoc(t, readme, text)
	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	checkXML(t, svg)
}

// checkReadmeMatchesDoc checks that the README's headline figures are the
// figures of the doc's tables, written by the same run.
func checkReadmeMatchesDoc(t *testing.T, readme, doc string) {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, "# bucketops\n\n<!-- bench-compare-readme:begin -->\nAgainst the git workflows") || !strings.HasSuffix(text, "<!-- bench-compare-readme:end -->\n\n## Quick start\n") {
		t.Errorf("the README's text outside its section changed, or the section is missing:\n%s", text)
	}
	if strings.Contains(text, "old figures") {
		t.Error("the README's old figures are still there")
	}
	if !strings.Contains(text, "](docs/benchmarks.md#bucketops-against-git)") {
		t.Errorf("the README doesn't link the report by its relative path:\n%s", text)
	}
	cell := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("the README has no row matching %s:\n%s", re, text)
		}
		return m[1]
	}
	for _, c := range []struct{ readme, doc string }{
		{`\| publish p50 at 5 prior releases \| \*\*([^*]+)\*\* \|`, "| 5 | %s / "},
		{`\| publishes/s, 2 writers, 2 apps \| \*\*([^*]+)\*\* \|`, "| 2 writers, 2 apps | bucketops | %s |"},
		{`\| stored per 1,000 releases of a 8 KiB app \| ([^|]+) \|`, "| — | %s | passed |"},
	} {
		v := strings.TrimSpace(cell(c.readme))
		if want := fmt.Sprintf(c.doc, v); !strings.Contains(doc, want) {
			t.Errorf("the README says %q, but the doc has no %q:\n%s", v, want, doc)
		}
	}
}

func checkXML(t *testing.T, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, data)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Space + " " + se.Name.Local
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Errorf("root element %q, want an svg in the SVG namespace", root)
	}
}

func TestChartEscapesTextAndSkipsMissingValues(t *testing.T) {
	r := &Results{Contenders: []string{idBucketops, idGitQueue}}
	r.History = []Row{{History: 10, By: map[string]*Sample{
		idBucketops: {Latencies: []time.Duration{time.Millisecond}},
		idGitQueue:  {},
	}}}
	r.Concurrency = []Row{{Writers: 8, SameApp: true, By: map[string]*Sample{
		idBucketops: {Published: 10, Wall: time.Second},
		idGitQueue:  {Published: 1, Wall: time.Second},
	}}}
	old := contenderNames[idGitQueue]
	contenderNames[idGitQueue] = `git <queue> & "friends"`
	t.Cleanup(func() { contenderNames[idGitQueue] = old })
	checkXML(t, renderChart(r))
}

// TestCheckFailsWhenTheFinalStateIsWrong tampers with each store after the
// publishes, as a writer that ignores sequences would: an older release
// written over the head must fail the check.
func TestCheckFailsWhenTheFinalStateIsWrong(t *testing.T) {
	needGit(t)
	overwrite := func(ctx context.Context, tgt target) error {
		const app = "prod/app-01"
		old := manifest(app, 1, minManifestBytes)
		switch tgt := tgt.(type) {
		case *bucketTarget:
			w := tgt.client.Bucket(benchBucket).Object(app + "/" + store.ObjectName).NewWriter(ctx)
			w.Metadata = map[string]string{"bucketops-digest": store.Digest(old), "bucketops-sequence": "1"}
			if _, err := w.Write(old); err != nil {
				return err
			}
			return w.Close()
		case *gitTarget:
			dir, err := tgt.clone(ctx)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(dir, appPath(app)), old); err != nil {
				return err
			}
			for _, args := range [][]string{{"commit", "-q", "-a", "-m", "older"}, {"push", "-q", "origin", "HEAD:main"}} {
				if _, err := tgt.git(ctx, dir, nil, args...); err != nil {
					return err
				}
			}
			return nil
		}
		return errors.New("unknown target")
	}
	for _, id := range contenderIDs {
		t.Run(id+" fails the check after an older release overwrote the head", func(t *testing.T) {
			t.Parallel()
			wl := workload{apps: []string{"prod/app-01", "prod/app-02"}, history: 3, writers: 2, releases: 2, size: minManifestBytes}
			s, err := runWorkload(t.Context(), newContender(id, Config{}), wl)
			if err != nil {
				t.Fatal(err)
			}
			if s.Check != "" || s.Published != 4 {
				t.Fatalf("untampered: check %q, %d published; want a pass and 4", s.Check, s.Published)
			}
			wl.tamper = overwrite
			s, err = runWorkload(t.Context(), newContender(id, Config{}), wl)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.Check, "prod/app-01 holds sequence 1, not the last intended 4") {
				t.Errorf("check = %q, want it to report prod/app-01's stale head", s.Check)
			}
			if !strings.Contains(s.Check, "prod/app-01 has 5 releases, not 4") {
				t.Errorf("check = %q, want it to report the extra release", s.Check)
			}
		})
	}
}

func TestSameAppWritersEndOnTheHighestSequence(t *testing.T) {
	needGit(t)
	for _, id := range contenderIDs {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			wl := workload{apps: []string{"prod/one"}, history: 2, writers: 3, releases: 3, size: minManifestBytes}
			s, err := runWorkload(t.Context(), newContender(id, Config{}), wl)
			if err != nil {
				t.Fatal(err)
			}
			if s.Check != "" {
				t.Errorf("check failed: %s", s.Check)
			}
			if s.Published+s.Dropped != 9 || s.Failed != 0 {
				t.Errorf("%d published, %d dropped, %d failed; want 9 publishes and no failure", s.Published, s.Dropped, s.Failed)
			}
		})
	}
}
