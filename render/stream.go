package render

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

const (
	sourcePrefix = "# Source: "
	separator    = "---\n"
	bom          = "\ufeff"
)

// chunk is the text of one document as cut from an input, before it is
// trimmed and validated.
type chunk struct {
	text []byte
	line int // line in the input of text's first line
}

// split cuts data (with "\n" line endings) into documents on the lines that
// YAML reads as document markers: "---", alone or followed by a space or tab
// and the start of the next document, and "...", alone or followed by a
// comment. A marker can't occur at column 0 inside a block scalar, and inside
// a quoted scalar YAML rejects it, so cutting the text is exact; it is also
// how kubectl reads a stream.
func split(data []byte) []chunk {
	var chunks []chunk
	start, startLine := 0, 1
	for pos, n := 0, 1; pos < len(data); n++ {
		end, next := len(data), len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end, next = pos+i, pos+i+1
		}
		// The rest of a "--- " line starts the next document, and may itself
		// be a marker: "--- --- a" is two markers and "a".
		for at := pos; ; {
			line := data[at:end]
			if isDocStart(line) {
				chunks = append(chunks, chunk{data[start:at], startLine})
				if len(line) > 3 {
					at += 4
					start, startLine = at, n
					continue
				}
				start, startLine = next, n+1
			} else if isDocEnd(line) {
				chunks = append(chunks, chunk{data[start:at], startLine})
				start, startLine = next, n+1
			}
			break
		}
		pos = next
	}
	return append(chunks, chunk{data[start:], startLine})
}

func isDocStart(line []byte) bool {
	return bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}

func isDocEnd(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("...")) {
		return false
	}
	if len(line) == 3 {
		return true
	}
	if line[3] != ' ' && line[3] != '\t' {
		return false
	}
	// Only a comment may follow; anything else stays in the text, for YAML
	// to reject.
	rest := bytes.TrimLeft(line[3:], " \t")
	return len(rest) == 0 || rest[0] == '#'
}

// normalizeNewlines returns data with "\r\n" and lone "\r" (both line breaks
// to YAML) replaced by "\n", so that a checkout with Windows line endings gives
// the same release.
func normalizeNewlines(data []byte) []byte {
	if bytes.IndexByte(data, '\r') < 0 {
		return data
	}
	out := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(out, []byte("\r"), []byte("\n"))
}

// trimBody returns text without trailing blank lines and spaces, ending in
// exactly one "\n", sharing text's memory when it can. ok is false if text
// holds nothing but comments and whitespace.
func trimBody(text []byte) (body []byte, ok bool) {
	t := bytes.TrimRight(text, " \t\n")
	if onlyComments(t) {
		return nil, false
	}
	if n := len(t); n < len(text) && text[n] == '\n' {
		return text[: n+1 : n+1], true
	}
	body = make([]byte, len(t)+1)
	copy(body, t)
	body[len(t)] = '\n'
	return body, true
}

// onlyComments reports whether every line of text is blank or a comment.
// A line starting with "#" is a comment unless a block or quoted scalar
// started on an earlier line, and that takes a line that isn't a comment.
func onlyComments(text []byte) bool {
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimLeft(line, " \t")
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// leadingBlankLines counts the lines at the start of body that hold only
// whitespace.
func leadingBlankLines(body []byte) int {
	n := 0
	for {
		i := bytes.IndexByte(body, '\n')
		if i < 0 || len(bytes.TrimLeft(body[:i], " \t")) > 0 {
			return n
		}
		body = body[i+1:]
		n++
	}
}

// checkSource rejects a file name that can't be written on one "# Source:"
// line, or that YAML readers of the stream would choke on.
func checkSource(source string) error {
	bad := !utf8.ValidString(source)
	for _, r := range source {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			bad = true
			break
		}
	}
	if !bad {
		return nil
	}
	return &InputError{
		File:    fmt.Sprintf("%q", source),
		Problem: "the file name contains a line break, a control character or invalid UTF-8",
		Hint:    "rename the file: its name is written on a comment line of the release",
	}
}

func sizeProblem(n int) string {
	return fmt.Sprintf("the release is %d bytes (%s), more than the limit of %d bytes (%s)",
		n, mib(int64(n)), MaxReleaseBytes, mib(MaxReleaseBytes))
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

const sizeHint = "a release is one object in the bucket; split the manifests into several apps"
