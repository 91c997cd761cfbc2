package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// input is the content of one input file.
type input struct {
	source string
	data   []byte
}

// AssembleDir assembles, validates and digests the release made of every
// *.yaml, *.yml and *.json file under root, recursively, in the order of
// their slash-separated paths relative to root, which become the documents'
// sources. Files and directories whose names start with "." (.git,
// .sops.yaml, .gitlab-ci.yml) are skipped, and symlinked directories are not
// followed; a symlinked file is read. If root is a file, that file alone is
// the input, whatever its name, with its base name as source.
//
// Every error that rejects the input wraps ErrInvalid; an input that can't be
// read also wraps the cause (errors.Is(err, fs.ErrNotExist)).
func AssembleDir(root string) (*Release, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, readFailure(root, err)
	}
	if !info.IsDir() {
		source := filepath.Base(root)
		data, err := readInput(root, source, MaxReleaseBytes)
		if err != nil {
			return nil, err
		}
		return assemble(root, []input{{source, data}})
	}
	files, err := manifestFiles(root)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, &InputError{
			Problem: "no *.yaml, *.yml or *.json files under " + root,
			Hint:    "files and directories whose names start with a dot are skipped",
		}
	}
	inputs := make([]input, 0, len(files))
	budget := int64(MaxReleaseBytes)
	for _, f := range files {
		data, err := readInput(f.path, f.rel, budget)
		if err != nil {
			return nil, err
		}
		budget -= int64(len(data))
		inputs = append(inputs, input{f.rel, data})
	}
	return assemble(root, inputs)
}

// AssembleStream assembles, validates and digests the release read from r,
// a multi-document YAML stream such as the output of helm template or
// kustomize build. name ("stdin" if empty) is the documents' source and names
// the input in errors. Every error that rejects the input wraps ErrInvalid;
// an error reading r doesn't.
func AssembleStream(name string, r io.Reader) (*Release, error) {
	if name == "" {
		name = "stdin"
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxReleaseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxReleaseBytes {
		return nil, tooLarge(name)
	}
	return assemble(name, []input{{name, data}})
}

// Parse parses a stored release back into its objects, taking each
// document's source from the first line of the document that starts with
// "# Source: ", and validates it as AssembleDir does. The release's Bytes are
// a copy of data and its Digest is Digest(data), whether or not data is in
// canonical form. An empty release is rejected: only a tombstone is empty,
// and it has no objects to parse.
func Parse(data []byte) (*Release, error) {
	if len(data) > MaxReleaseBytes {
		return nil, &InputError{Problem: sizeProblem(len(data)), Hint: sizeHint}
	}
	stored := bytes.Clone(data)
	perSource := make(map[string]int)
	var docs []document
	for _, c := range split(normalizeNewlines(stored)) {
		text := bytes.TrimPrefix(c.text, []byte(bom))
		source, rest, removed := cutSource(text)
		body, ok := trimBody(rest)
		if !ok {
			continue
		}
		perSource[source]++
		docs = append(docs, document{
			source: source, index: perSource[source], body: body, untrimmed: rest, line: c.line, removed: removed,
		})
	}
	if len(docs) == 0 {
		return nil, &InputError{Problem: "no Kubernetes objects in the release", Hint: "only a tombstone release is empty"}
	}
	objs, err := validate(docs)
	if err != nil {
		return nil, err
	}
	return &Release{Objects: objs, Bytes: stored, Digest: Digest(stored)}, nil
}

// cutSource takes the first "# Source: " line out of text.
func cutSource(text []byte) (source string, rest []byte, removed int) {
	for off, n := 0, 1; off < len(text); n++ {
		end, next := len(text), len(text)
		if i := bytes.IndexByte(text[off:], '\n'); i >= 0 {
			end, next = off+i, off+i+1
		}
		if line := text[off:end]; bytes.HasPrefix(line, []byte(sourcePrefix)) {
			source = string(line[len(sourcePrefix):])
			if off == 0 {
				return source, text[next:], n
			}
			rest = make([]byte, 0, off+len(text)-next)
			rest = append(append(rest, text[:off]...), text[next:]...)
			return source, rest, n
		}
		off = next
	}
	return "", text, 0
}

// assemble validates the inputs and writes the canonical stream. where names
// the whole input in errors.
func assemble(where string, inputs []input) (*Release, error) {
	var docs []document
	for _, in := range inputs {
		if err := checkSource(in.source); err != nil {
			return nil, err
		}
		index := 0
		for _, c := range split(normalizeNewlines(in.data)) {
			text := bytes.TrimPrefix(c.text, []byte(bom))
			body, ok := trimBody(text)
			if !ok {
				continue
			}
			index++
			docs = append(docs, document{source: in.source, index: index, body: body, untrimmed: text, line: c.line})
		}
	}
	if len(docs) == 0 {
		return nil, &InputError{
			Problem: "no Kubernetes objects in " + where + " (only comments and blank documents)",
			Hint:    identityHint,
		}
	}
	// The size is known before the documents are parsed, which is the slow
	// part.
	size := len(separator) * (len(docs) - 1)
	for _, d := range docs {
		size += len(sourcePrefix) + len(d.source) + 1 + len(d.body)
	}
	if size > MaxReleaseBytes {
		return nil, &InputError{Problem: sizeProblem(size), Hint: sizeHint}
	}
	objs, err := validate(docs)
	if err != nil {
		return nil, err
	}
	stream := make([]byte, 0, size)
	offsets := make([]int, len(objs))
	for i, o := range objs {
		if i > 0 {
			stream = append(stream, separator...)
		}
		stream = append(stream, sourcePrefix...)
		stream = append(stream, o.Source...)
		stream = append(stream, '\n')
		offsets[i] = len(stream)
		stream = append(stream, o.Body...)
	}
	// The bodies point into the stream, so the inputs can be collected.
	for i := range objs {
		end := offsets[i] + len(objs[i].Body)
		objs[i].Body = stream[offsets[i]:end:end]
	}
	return &Release{Objects: objs, Bytes: stream, Digest: Digest(stream)}, nil
}

// validate validates every document, in order, and rejects two documents
// naming the same object or aliases that expand to too much in all.
func validate(docs []document) ([]Object, error) {
	objs := make([]Object, len(docs))
	first := make(map[string]int, len(docs))
	var expanded int64
	for i := range docs {
		d := &docs[i]
		o, err := d.object(&expanded)
		if err != nil {
			return nil, err
		}
		key := o.Key()
		if j, ok := first[key]; ok {
			prev := &docs[j]
			return nil, d.fail("", fmt.Sprintf("duplicates %s from %s document %d (line %d)", objs[j], prev.source, prev.index, prev.start()),
				"each Kubernetes object may appear only once in a release")
		}
		first[key] = i
		objs[i] = o
	}
	return objs, nil
}

type manifestFile struct {
	path string // to open
	rel  string // slash-separated, relative to the root
}

// manifestFiles lists the manifest files under root, sorted by relative path.
func manifestFiles(root string) ([]manifestFile, error) {
	var files []manifestFile
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			name := rel
			if name == "" {
				name = root
			}
			return readFailure(name, err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p, r := filepath.Join(dir, name), path.Join(rel, name)
			switch t := e.Type(); {
			case t.IsDir():
				if err := walk(p, r); err != nil {
					return err
				}
			case !IsManifest(name):
			case t&fs.ModeSymlink != 0:
				info, err := os.Stat(p)
				if err != nil {
					return readFailure(r, err)
				}
				if info.IsDir() {
					continue // a symlinked directory could loop or leave the tree
				}
				if !info.Mode().IsRegular() {
					return notRegular(r)
				}
				files = append(files, manifestFile{p, r})
			case t.IsRegular():
				files = append(files, manifestFile{p, r})
			default:
				return notRegular(r)
			}
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return nil, err
	}
	// Sorting the whole paths, not each directory, puts "a-b/x.yaml" before
	// "a/x.yaml" as the byte order of the paths says.
	slices.SortFunc(files, func(a, b manifestFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

// IsManifest reports whether a file name is one AssembleDir reads:
// *.yaml, *.yml or *.json.
func IsManifest(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readInput reads the file at name, failing once it holds more than budget
// bytes, without reading the rest.
func readInput(name, source string, budget int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, readFailure(source, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, budget+1))
	if err != nil {
		return nil, readFailure(source, err)
	}
	if int64(len(data)) > budget {
		return nil, tooLarge(source)
	}
	return data, nil
}

func readFailure(name string, err error) error {
	problem := "cannot be read: " + err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		problem = "cannot be read: " + pe.Err.Error()
	}
	if errors.Is(err, fs.ErrNotExist) {
		problem = "does not exist"
	}
	return &readError{&InputError{File: name, Problem: problem}, err}
}

func notRegular(name string) error {
	return &InputError{File: name, Problem: "not a regular file", Hint: "only files are read as manifests"}
}

func tooLarge(name string) error {
	return &InputError{
		File:    name,
		Problem: fmt.Sprintf("reading it takes the input over the limit of a release, %d bytes (%s)", MaxReleaseBytes, mib(MaxReleaseBytes)),
		Hint:    sizeHint,
	}
}
