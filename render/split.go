package render

import "bytes"

// chunk is the text of one YAML document and the line it starts on.
type chunk struct {
	text []byte
	line int
}

// split cuts a YAML stream into documents at "---" and "..." lines. A
// document marker can't occur at column 0 inside a block scalar, and is
// forbidden inside a flow scalar, so a split on lines is exact; it is how
// kubectl reads streams. Documents holding only comments and blank lines are
// dropped.
func split(data []byte) []chunk {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []chunk
	cur := chunk{line: 1}
	flush := func(next int) {
		if !blank(cur.text) {
			out = append(out, chunk{text: tidy(cur.text), line: cur.line + leadingBlankLines(cur.text)})
		}
		cur = chunk{line: next}
	}
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		content := bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.Equal(content, []byte("---")), bytes.Equal(content, []byte("...")):
			flush(n + 1)
		case bytes.HasPrefix(content, []byte("--- ")), bytes.HasPrefix(content, []byte("---\t")):
			flush(n)
			cur.text = append(cur.text, line[4:]...)
		default:
			cur.text = append(cur.text, line...)
		}
	}
	flush(0)
	return out
}

// blank reports whether text holds nothing but comments and whitespace.
func blank(text []byte) bool {
	for _, l := range bytes.Split(text, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

func leadingBlankLines(text []byte) int {
	n := 0
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 || len(bytes.TrimSpace(text[:i])) > 0 {
			break
		}
		text = text[i+1:]
		n++
	}
	return n
}

// tidy drops blank lines before and whitespace after a document and ends it
// with one newline, so the stream doesn't depend on how files end.
func tidy(text []byte) []byte {
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 || len(bytes.TrimSpace(text[:i])) > 0 {
			break
		}
		text = text[i+1:]
	}
	text = bytes.TrimRight(text, " \t\r\n")
	out := make([]byte, len(text)+1)
	copy(out, text)
	out[len(text)] = '\n'
	return out
}
