// Package docsection rewrites the generated section of a hand-written
// document: the lines between <!-- NAME:begin --> and <!-- NAME:end -->.
// The text outside the markers is kept byte for byte; a document without
// the markers gets the section appended; one with a single marker, or with
// them repeated or out of order, is an error, since guessing would destroy
// hand-written text.
package docsection

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// Markers returns the begin and end marker lines of section name.
func Markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// Replace returns doc with section name's text replaced by text.
func Replace(doc, text []byte, name string) ([]byte, error) {
	beginMarker, endMarker := Markers(name)
	nb, ne := bytes.Count(doc, []byte(beginMarker)), bytes.Count(doc, []byte(endMarker))
	block := append(append([]byte(beginMarker+"\n"), text...), []byte(endMarker+"\n")...)
	switch {
	case nb == 0 && ne == 0:
		out := bytes.TrimRight(doc, "\n")
		if len(out) > 0 {
			out = append(out, "\n\n"...)
		}
		return append(out, block...), nil
	case nb != 1 || ne != 1:
		return nil, fmt.Errorf("found %d %q and %d %q lines; want one of each, or neither to append the section", nb, beginMarker, ne, endMarker)
	}
	b := bytes.Index(doc, []byte(beginMarker))
	e := bytes.Index(doc, []byte(endMarker))
	if e < b {
		return nil, fmt.Errorf("%q comes before %q", endMarker, beginMarker)
	}
	rest := doc[e+len(endMarker):]
	rest = bytes.TrimPrefix(rest, []byte("\n"))
	out := append([]byte{}, doc[:b]...)
	out = append(out, block...)
	return append(out, rest...), nil
}

// Update replaces section name of the file at path with text, creating the
// file if it doesn't exist; the file is replaced whole (write, rename).
func Update(path, name, text string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, err := Replace(doc, []byte(text), name)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("update %s: %w", path, err)
	}
	return nil
}
