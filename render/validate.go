package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// object validates one document and reads its identity. where locates it
// for errors (File, Document, Line).
func object(source string, c chunk, where InputError) (obj Object, err error) {
	fail := func(field, problem, hint string) (Object, error) {
		e := where
		e.Field, e.Problem, e.Hint = field, problem, hint
		return Object{}, &e
	}
	// yaml.v3 has panicked on hostile input before; bad input must still be
	// an error, never a crash.
	defer func() {
		if r := recover(); r != nil {
			obj, err = fail("", fmt.Sprintf("unparsable YAML (%v)", r), "")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(c.text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		e := where
		e.Problem = "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			e.Line = c.line + n - 1
			e.Problem = "invalid YAML: " + m[2]
		}
		return Object{}, &e
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fail("", "holds more than one YAML document", "separate documents with a line holding only ---")
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fail("", "is not a mapping", "every document must be a Kubernetes object with apiVersion, kind and metadata.name")
	}
	root := doc.Content[0]
	obj = Object{Source: source, Body: c.text}

	if sops := lookup(root, "sops"); sops != nil {
		obj.Encrypted = true
		mac := lookup(sops, "mac")
		if sops.Kind != yaml.MappingNode || mac == nil || mac.Kind != yaml.ScalarNode || mac.Value == "" {
			return fail("sops", "has no mac: this is not a valid SOPS-encrypted document", "encrypt it with sops, or remove the sops key")
		}
		// Identity fields in plain text (encrypted_regex ^(data|stringData)$,
		// as usual for Secrets) identify the object; encrypted ones don't.
		av, kind, md := plain(lookup(root, "apiVersion")), plain(lookup(root, "kind")), lookup(root, "metadata")
		if av != "" && kind != "" && md != nil && md.Kind == yaml.MappingNode {
			if name := plain(lookup(md, "name")); name != "" {
				obj.APIVersion, obj.Kind, obj.Name = av, kind, name
				obj.Namespace = plain(lookup(md, "namespace"))
			}
		}
		return obj, nil
	}

	str := func(n *yaml.Node, field string) (string, error) {
		switch {
		case n == nil:
			_, err := fail(field, "missing", "every document must be a Kubernetes object with apiVersion, kind and metadata.name")
			return "", err
		case n.Kind != yaml.ScalarNode || n.Tag != "!!str":
			_, err := fail(field, "must be a string", "")
			return "", err
		case strings.TrimSpace(n.Value) == "":
			_, err := fail(field, "is empty", "")
			return "", err
		}
		return n.Value, nil
	}
	if obj.APIVersion, err = str(lookup(root, "apiVersion"), "apiVersion"); err != nil {
		return Object{}, err
	}
	if obj.Kind, err = str(lookup(root, "kind"), "kind"); err != nil {
		return Object{}, err
	}
	md := lookup(root, "metadata")
	if md == nil {
		return fail("metadata", "missing", "every document must be a Kubernetes object with apiVersion, kind and metadata.name")
	}
	if md.Kind != yaml.MappingNode {
		return fail("metadata", "must be a mapping", "")
	}
	if obj.Name, err = str(lookup(md, "name"), "metadata.name"); err != nil {
		return Object{}, err
	}
	if ns := lookup(md, "namespace"); ns != nil {
		if obj.Namespace, err = str(ns, "metadata.namespace"); err != nil {
			return Object{}, err
		}
	}
	return obj, nil
}

// lookup returns the value of key in a mapping node, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// plain returns a scalar's value unless it is absent or SOPS ciphertext.
func plain(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode || strings.HasPrefix(n.Value, "ENC[") {
		return ""
	}
	return n.Value
}
