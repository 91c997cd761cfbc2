// Package render owns the release format: the canonical multi-document YAML
// stream stored as one object per release, how it is assembled from files,
// validated and parsed back.
//
// The contract: the same input always gives the same bytes (files sorted by
// path, each document preceded by a "# Source:" comment), and every document
// is kept as written, so SOPS-encrypted documents are stored byte-for-byte
// and their MACs stay valid.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MaxReleaseBytes bounds the assembled stream of one release.
const MaxReleaseBytes = 10 << 20

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid release input")

// InputError says what is wrong, where, and what to do.
type InputError struct {
	// File is the input file's relative path ("stdin" for standard input),
	// or a stored document's "# Source:" path.
	File string
	// Document is the 1-based index of the document in File; 0 when the
	// error is about the file or the whole release.
	Document int
	// Line is the 1-based line in File of the document or of the YAML error; 0 if unknown.
	Line int
	// Field is the field at fault, such as metadata.name.
	Field   string
	Problem string
	Hint    string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(cmpOr(e.File, "release"))
	if e.Document > 0 {
		fmt.Fprintf(&b, ": document %d", e.Document)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Problem)
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}

// Unwrap makes every InputError an ErrInvalid.
func (e *InputError) Unwrap() error { return ErrInvalid }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Object is one document of a release.
type Object struct {
	// Source is the slash-separated relative path of the file it came from.
	Source string
	// APIVersion, Kind, Namespace and Name identify the object. APIVersion
	// is empty only for a SOPS document whose identity is itself encrypted.
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// Encrypted is true for a document with a top-level sops key.
	Encrypted bool
	// Body is the document's own text, ending in exactly one newline,
	// without separator or "# Source:" line.
	Body []byte

	index int // position in the release, for the key of an anonymous SOPS document
}

// Key identifies the object for duplicate detection and diffs: group, kind,
// namespace and name.
func (o Object) Key() string {
	if o.APIVersion == "" {
		return fmt.Sprintf("sops:%s#%d", o.Source, o.index)
	}
	group := ""
	if g, _, found := strings.Cut(o.APIVersion, "/"); found {
		group = g
	}
	return group + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name
}

// String is the human form: "Deployment prod/api", or "Namespace prod".
func (o Object) String() string {
	switch {
	case o.APIVersion == "":
		return fmt.Sprintf("encrypted document %d of %s", o.index+1, o.Source)
	case o.Namespace == "":
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Release is an assembled or parsed release.
type Release struct {
	Objects []Object
	// Bytes is the canonical stream.
	Bytes []byte
	// Digest is Digest(Bytes).
	Digest string
}

// Resources is the number of Kubernetes objects in the release.
func (r *Release) Resources() int { return len(r.Objects) }

// Digest returns "sha256:<hex>" of data, the form of bucketops-digest.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
