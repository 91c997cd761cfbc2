// Command compare measures bucketops against the git workflows it replaces,
// in one process run on one machine, and writes the results as a section of
// docs/benchmarks.md and an SVG chart.
//
// The contenders publish the same releases: bucketops through the real GCS
// client to an in-process fake-gcs-server; and three ways CI pipelines write
// to a git repository with the git command line: a fresh clone per publish
// (fetch, rebase and retry when the push is rejected), the serialized queue
// of the seed article (one worker clones, commits and pushes per message),
// and a working copy kept between publishes. git runs over a local path and
// bucketops against a local emulator: neither pays a network.
//
// The one contract that matters: figures are reported, never asserted, but
// every workload's final state is checked (the last intended release of
// every app, nothing lost), and a run whose check fails says so in the
// report and exits non-zero.
//
// It uses the standard flag package rather than cobra: it is a harness run by
// make, not a product command, and make passes single-dash flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// errCheckFailed is returned after the report is written when a workload's
// correctness check failed for some contender.
var errCheckFailed = errors.New("a correctness check failed; see the report")

// Config is one run's sizes and outputs.
type Config struct {
	// Doc is the Markdown file whose bench-compare section is replaced; empty
	// prints the section to stdout.
	Doc string
	// Chart is the SVG written; empty writes none.
	Chart string
	// Readme is the Markdown file whose bench-compare-readme section gets
	// the headline table of the same run; empty writes none.
	Readme string

	Contenders         []string
	History            []int // prior releases before the history workload's publishes
	HistoryReleases    int   // publishes measured at each history length
	Writers            []int // concurrent writers on distinct apps
	SameApp            int   // concurrent writers on one app; 0 skips
	Releases           int   // publishes per writer in the concurrency workloads
	ConcurrencyHistory int   // prior releases, spread over the apps, before the concurrency workloads
	ManifestBytes      int   // size of a release in the history and concurrency workloads
	SizeReleases       int   // releases in the repository-size workload; 0 skips
	AppBytes           int   // size of a release in the repository-size workload
	CloneDepth         int   // --depth of the git clones (0: full clones, as the seed's queue did)
	Timeout            time.Duration
	Now                time.Time // the run's date in the report
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("-%s must be positive, got %d", name, v))
		}
	}
	nonNegative := func(name string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("-%s must not be negative, got %d", name, v))
		}
	}
	if len(c.Contenders) == 0 {
		errs = append(errs, errors.New("-contenders names none"))
	}
	for _, name := range c.Contenders {
		if !slices.Contains(contenderIDs, name) {
			errs = append(errs, fmt.Errorf("-contenders: unknown %q (known: %s)", name, strings.Join(contenderIDs, ",")))
		}
	}
	for _, h := range c.History {
		nonNegative("history", h)
	}
	for _, w := range c.Writers {
		positive("writers", w)
	}
	positive("history-releases", c.HistoryReleases)
	positive("releases", c.Releases)
	positive("manifest-bytes", c.ManifestBytes)
	positive("app-bytes", c.AppBytes)
	nonNegative("same-app", c.SameApp)
	nonNegative("concurrency-history", c.ConcurrencyHistory)
	nonNegative("size-releases", c.SizeReleases)
	nonNegative("clone-depth", c.CloneDepth)
	if c.ManifestBytes < minManifestBytes || c.AppBytes < minManifestBytes {
		errs = append(errs, fmt.Errorf("-manifest-bytes and -app-bytes must be at least %d", minManifestBytes))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// run parses args, measures, and writes the report; main is the only caller
// that exits.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	res, err := measure(ctx, cfg, progress)
	if err != nil {
		return err
	}
	section := renderSection(res)
	if cfg.Chart != "" {
		if err := os.WriteFile(cfg.Chart, renderChart(res), 0o644); err != nil {
			return fmt.Errorf("write chart: %w", err)
		}
		progress("wrote %s", cfg.Chart)
	}
	if cfg.Doc == "" {
		if _, err := io.WriteString(stdout, section); err != nil {
			return err
		}
	} else {
		if err := updateDoc(cfg.Doc, section); err != nil {
			return err
		}
		progress("wrote the bench-compare section of %s", cfg.Doc)
	}
	if cfg.Readme != "" {
		if err := writeReadme(cfg, res); err != nil {
			return err
		}
		progress("wrote the %s section of %s", readmeSection, cfg.Readme)
	}
	progress("done in %s", res.Wall.Round(time.Second))
	if !res.AllChecksPassed() {
		return errCheckFailed
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := Config{Now: time.Now()}
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: go run ./bench/compare [flags]

Measures bucketops against the git workflows it replaces, in one run, and
writes the results between the bench-compare markers of -doc and the chart
-chart. Contenders: bucketops (real GCS client, in-process fake-gcs-server),
git-clone (clone, commit, push; on rejection fetch, rebase, retry), git-queue
(the seed's serialized queue: one worker clones, commits and pushes per
message), git-workdir (a kept working copy: fetch, rebase, push).

Workloads: history (one writer, publishes after -history prior releases),
concurrency (-writers writers on distinct apps, then -same-app writers on one
app, -releases publishes each), size (bytes stored for -size-releases
releases of an -app-bytes app).

Flags:
`)
		fs.PrintDefaults()
	}
	var contenders, history, writers string
	fs.StringVar(&cfg.Doc, "doc", "", "Markdown file whose bench-compare section is replaced (empty: print the section to stdout)")
	fs.StringVar(&cfg.Chart, "chart", "", "SVG chart to write (empty: none)")
	fs.StringVar(&cfg.Readme, "readme", "", "Markdown file whose bench-compare-readme section gets the run's headline table (empty: none)")
	fs.StringVar(&contenders, "contenders", strings.Join(contenderIDs, ","), "contenders to run, comma-separated")
	fs.StringVar(&history, "history", "10,1000,10000", "history lengths (prior releases of the app), comma-separated; empty skips the workload")
	fs.IntVar(&cfg.HistoryReleases, "history-releases", 20, "publishes measured at each history length")
	fs.StringVar(&writers, "writers", "1,8,32", "concurrent writers on distinct apps, comma-separated; empty skips")
	fs.IntVar(&cfg.SameApp, "same-app", 8, "concurrent writers on one app (0 skips)")
	fs.IntVar(&cfg.Releases, "releases", 3, "publishes per writer in the concurrency workloads")
	fs.IntVar(&cfg.ConcurrencyHistory, "concurrency-history", 1000, "prior releases, spread over the apps, before each concurrency workload")
	fs.IntVar(&cfg.ManifestBytes, "manifest-bytes", 4096, "bytes of a release in the history and concurrency workloads")
	fs.IntVar(&cfg.SizeReleases, "size-releases", 1000, "releases in the repository-size workload (0 skips)")
	fs.IntVar(&cfg.AppBytes, "app-bytes", 50*1024, "bytes of a release in the repository-size workload")
	fs.IntVar(&cfg.CloneDepth, "clone-depth", 0, "git clone --depth for git-clone and git-queue (0: full clones, as the seed's queue did)")
	fs.DurationVar(&cfg.Timeout, "timeout", 60*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	var errs []error
	var err error
	cfg.Contenders = splitList(contenders)
	if cfg.History, err = parseInts(history); err != nil {
		errs = append(errs, fmt.Errorf("-history: %w", err))
	}
	if cfg.Writers, err = parseInts(writers); err != nil {
		errs = append(errs, fmt.Errorf("-writers: %w", err))
	}
	if err := errors.Join(append(errs, cfg.Validate())...); err != nil {
		return Config{}, fmt.Errorf("%w: %w", errUsage, err)
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
