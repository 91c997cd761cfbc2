package render

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const sourcePrefix = "# Source: "

// input is one file's bytes and its name in the release.
type input struct {
	name string
	data []byte
}

// AssembleDir assembles every *.yaml, *.yml and *.json file under root,
// recursively and sorted by slash-separated relative path, into a release.
// Hidden directories (.git) are skipped and symlinked directories not
// followed. A root that is a file is the only input.
func AssembleDir(root string) (*Release, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, &InputError{File: root, Problem: "cannot read: " + unwrapPath(err), Hint: "give a directory of manifests, a file, or - for standard input"}
	}
	var paths []string
	if !info.IsDir() {
		paths = []string{root}
	} else {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if manifestFile(d.Name()) {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			return nil, &InputError{File: root, Problem: "cannot read: " + unwrapPath(err)}
		}
	}
	var inputs []input
	total := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if info.IsDir() {
			rel, _ := filepath.Rel(root, p)
			name = filepath.ToSlash(rel)
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, &InputError{File: name, Problem: "cannot read: " + unwrapPath(err)}
		}
		if !st.Mode().IsRegular() {
			continue // a symlink to a directory or a device: not a manifest
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, &InputError{File: name, Problem: "cannot read: " + unwrapPath(err)}
		}
		data, err := readLimited(f, name, MaxReleaseBytes-total)
		f.Close()
		if err != nil {
			return nil, err
		}
		total += len(data)
		inputs = append(inputs, input{name, data})
	}
	if len(inputs) == 0 {
		return nil, &InputError{File: root, Problem: "no *.yaml, *.yml or *.json files", Hint: "point at the directory your manifests were rendered into"}
	}
	slices.SortFunc(inputs, func(a, b input) int { return strings.Compare(a.name, b.name) })
	return assemble(inputs, root)
}

// AssembleStream assembles one YAML stream (standard input) named name.
func AssembleStream(name string, r io.Reader) (*Release, error) {
	data, err := readLimited(r, name, MaxReleaseBytes)
	if err != nil {
		return nil, err
	}
	return assemble([]input{{name, data}}, name)
}

func manifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func readLimited(r io.Reader, name string, limit int) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, &InputError{File: name, Problem: "cannot read: " + err.Error()}
	}
	if len(data) > limit {
		return nil, tooBig(name)
	}
	return data, nil
}

func tooBig(name string) error {
	return &InputError{File: name, Problem: fmt.Sprintf("the release is larger than %d MiB", MaxReleaseBytes>>20), Hint: "split the app into several apps"}
}

func unwrapPath(err error) string {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// assemble validates the inputs' documents and writes the canonical stream.
func assemble(inputs []input, what string) (*Release, error) {
	var objs []Object
	for _, in := range inputs {
		for i, c := range split(in.data) {
			obj, err := object(in.name, c, InputError{File: in.name, Document: i + 1, Line: c.line})
			if err != nil {
				return nil, err
			}
			objs = append(objs, obj)
		}
	}
	if len(objs) == 0 {
		return nil, &InputError{File: what, Problem: "no Kubernetes objects, only comments or empty documents", Hint: "to remove every object of an app on purpose, use bucketops retire"}
	}
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(sourcePrefix + o.Source + "\n")
		b.Write(o.Body)
	}
	if b.Len() > MaxReleaseBytes {
		return nil, tooBig(what)
	}
	return finish(objs, b.Bytes())
}

// Parse reads a stored canonical stream back into its objects, with the same
// validation as assembling it. The bucket can be written by anything: a
// stream bucketops did not write is checked just the same.
func Parse(data []byte) (*Release, error) {
	if len(data) > MaxReleaseBytes {
		return nil, tooBig("release")
	}
	var objs []Object
	perSource := map[string]int{}
	for _, c := range split(data) {
		source := ""
		text := c.text
		if rest, ok := bytes.CutPrefix(text, []byte(sourcePrefix)); ok {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			source, text = strings.TrimSpace(string(line)), after
		}
		if blank(text) {
			continue
		}
		c.text = tidy(text)
		perSource[source]++
		obj, err := object(source, c, InputError{File: source, Document: perSource[source], Line: c.line})
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, &InputError{Problem: "no Kubernetes objects"}
	}
	return finish(objs, data)
}

// finish numbers the objects, rejects duplicates and computes the digest.
func finish(objs []Object, data []byte) (*Release, error) {
	seen := make(map[string]int, len(objs))
	perFile := map[string]int{}
	docIndex := make([]int, len(objs))
	for i := range objs {
		objs[i].index = i
		perFile[objs[i].Source]++
		docIndex[i] = perFile[objs[i].Source]
		k := objs[i].Key()
		if j, dup := seen[k]; dup {
			return nil, &InputError{
				File: objs[i].Source, Document: docIndex[i],
				Problem: fmt.Sprintf("%s is already defined in %s document %d", objs[i], cmpOr(objs[j].Source, "release"), docIndex[j]),
				Hint:    "each object may appear once in a release",
			}
		}
		seen[k] = i
	}
	return &Release{Objects: objs, Bytes: data, Digest: Digest(data)}, nil
}
