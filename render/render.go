// Package render owns the release format: the canonical multi-document YAML
// stream that is stored as one GCS object per release. It assembles that
// stream from manifest files or stdin, validates every document, digests the
// bytes, and parses a stored stream back into its objects.
//
// The contract: the same input always gives the same bytes, and a
// SOPS-encrypted document is kept byte-for-byte. The only changes made to a
// document's text are the ones YAML itself ignores: line endings become "\n",
// a leading byte order mark is dropped, and trailing blank lines and spaces are
// trimmed (a document whose value would change by that is rejected instead).
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxReleaseBytes is the largest release (the assembled stream) accepted.
// The inputs read to assemble it may not exceed it either, so that a huge
// file is never read into memory.
const MaxReleaseBytes = 10 << 20

// ErrInvalid is wrapped by every error that rejects the input of a release.
var ErrInvalid = errors.New("invalid release input")

// InputError says what is wrong with the input of a release, where, and what
// to do about it.
type InputError struct {
	// File is the relative path of the input file ("stdin" for standard
	// input) or, for a stored release, the document's "# Source:" path. It is
	// empty when the error is about the whole input.
	File string
	// Document is the 1-based index of the document within File, counting
	// only documents that are not blank or comments; 0 when the error is
	// about the file or the whole release.
	Document int
	// Line is the 1-based line within File where the document starts, or of
	// the YAML error or the alias at fault; 0 if unknown. For a stored
	// release it is the line within the stored stream.
	Line int
	// Field is the offending field, such as "metadata.name"; empty if the
	// error is not about one field.
	Field string
	// Problem says what is wrong, such as "missing".
	Problem string
	// Hint says what to do; it may be empty.
	Hint string
}

// Error formats the error as "file: document N (line L): field: problem; hint",
// leaving out the parts that are empty.
func (e *InputError) Error() string {
	var parts []string
	if e.File != "" {
		parts = append(parts, e.File)
	}
	switch {
	case e.Document > 0 && e.Line > 0:
		parts = append(parts, fmt.Sprintf("document %d (line %d)", e.Document, e.Line))
	case e.Document > 0:
		parts = append(parts, fmt.Sprintf("document %d", e.Document))
	case e.Line > 0:
		parts = append(parts, fmt.Sprintf("line %d", e.Line))
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	msg := strings.Join(append(parts, e.Problem), ": ")
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Unwrap returns ErrInvalid.
func (e *InputError) Unwrap() error { return ErrInvalid }

// readError is an input that could not be read: an *InputError that also
// wraps the cause, so that errors.Is(err, fs.ErrNotExist) still works.
type readError struct {
	input *InputError
	err   error
}

func (e *readError) Error() string   { return e.input.Error() }
func (e *readError) Unwrap() []error { return []error{e.input, e.err} }

// Object is one document of a release.
type Object struct {
	// Source is the slash-separated relative path of the file the document
	// came from.
	Source string
	// APIVersion is empty only for a SOPS document whose identity fields are
	// themselves encrypted.
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// Encrypted reports whether the document has a top-level sops key.
	Encrypted bool
	// Body is the document's own text, ending in exactly one "\n", without
	// the separator or the "# Source:" line.
	Body []byte

	// doc is the 1-based index of the document within Source; it names a
	// SOPS document whose identity can't be read.
	doc int
}

// opaque reports whether the object is a SOPS document whose identity can't
// be read without decrypting it.
func (o Object) opaque() bool { return o.Encrypted && o.APIVersion == "" }

// Key returns the object's identity, used to find duplicates and to match
// objects between releases: "<group>/<kind>/<namespace>/<name>", where group
// is the part of apiVersion before "/" ("" for the core group "v1"), so that
// another version of the same object has the same key. A SOPS document whose
// identity is encrypted is keyed by its place instead:
// "sops:<source>#<document number within source>".
func (o Object) Key() string {
	if o.opaque() {
		return "sops:" + o.Source + "#" + strconv.Itoa(o.doc)
	}
	group, _, found := strings.Cut(o.APIVersion, "/")
	if !found {
		group = ""
	}
	return group + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name
}

// String returns the object in the form people read: "Deployment prod/api",
// or "ClusterRole admin" when it has no namespace.
func (o Object) String() string {
	if o.opaque() {
		return fmt.Sprintf("encrypted document %d of %s", o.doc, o.Source)
	}
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Release is a validated release: its objects and the canonical stream they
// are stored as.
type Release struct {
	Objects []Object
	// Bytes is the stream: for an assembled release, the canonical stream;
	// for a parsed one, the stored bytes as given.
	Bytes []byte
	// Digest is Digest(Bytes).
	Digest string
}

// Resources returns the number of Kubernetes objects in the release.
func (r *Release) Resources() int { return len(r.Objects) }

// Digest returns "sha256:" followed by the lowercase hex SHA-256 of data: the
// bucketops-digest of a release.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
