package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

// summaryHeader starts the table push --summary appends a row to.
const summaryHeader = "| App | Generation | Digest | Status |\n|---|---|---|---|\n"

// summary is the Markdown file push --summary appends its outcome to: the
// job summary of GitHub Actions ($GITHUB_STEP_SUMMARY), or any report a
// pipeline keeps.
type summary struct {
	f *os.File
}

// openSummary opens --summary FILE, by default $GITHUB_STEP_SUMMARY, before
// anything is published, so a path that can't be written is a usage error
// and not a lost row. No file: nil.
func openSummary(cmd *cobra.Command, e *env, flag string) (*summary, error) {
	path := flag
	if !cmd.Flags().Changed("summary") {
		path = e.getenv("GITHUB_STEP_SUMMARY")
	}
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, usagef("--summary: %v", err)
	}
	return &summary{f: f}, nil
}

// summaryRow is one push's outcome.
type summaryRow struct {
	app        string
	generation int64 // 0: nothing was published
	digest     string
	status     string
}

// add appends row, after the table's header unless the file already ends
// with a row of the table (an earlier push of the same step).
func (s *summary) add(row summaryRow) error {
	var b strings.Builder
	last, err := lastLine(s.f)
	if err != nil {
		return err
	}
	if !isSummaryRow(last) {
		if last != "" {
			b.WriteString("\n")
		}
		b.WriteString(summaryHeader)
	}
	gen, digest := "-", "-"
	if row.generation != 0 {
		gen = strconv.FormatInt(row.generation, 10)
	}
	if row.digest != "" {
		digest = "`" + row.digest + "`"
	}
	fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(row.app), gen, digest, cell(row.status))
	if _, err := io.WriteString(s.f, b.String()); err != nil {
		return err
	}
	return nil
}

func (s *summary) close() error { return s.f.Close() }

// lastLine is the file's last non-empty line, from its last 4 KiB.
func lastLine(f *os.File) (string, error) {
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	n := min(st.Size(), 4<<10)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, st.Size()-n); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	buf = bytes.TrimRight(buf, "\r\n")
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		buf = buf[i+1:]
	}
	return string(buf), nil
}

// isSummaryRow says whether line is a row of four cells, as push writes.
func isSummaryRow(line string) bool {
	return strings.HasPrefix(line, "|") && strings.Count(line, "|")-strings.Count(line, `\|`) == 5
}

// cell makes s one table cell's text.
func cell(s string) string {
	s = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
	if s == "" {
		return "-"
	}
	return s
}

// pushStatus names push's outcome in the summary: the publish (published,
// unchanged, or why nothing was: invalid, conflict, stale, failed), then,
// with --wait, the deploy's.
func pushStatus(res *store.Result, waited bool, err error) string {
	if res == nil {
		switch exitCode(err) {
		case exitInvalid:
			return "invalid"
		case exitConflict:
			return "conflict"
		case exitStale:
			return "stale"
		}
		return "failed"
	}
	status := "published"
	if res.Unchanged {
		status = "unchanged"
	}
	if !waited {
		return status
	}
	switch {
	case err == nil:
		return status + ", deployed"
	case exitCode(err) == exitNotDeployed:
		return status + ", not deployed"
	}
	return status + ", wait failed"
}
