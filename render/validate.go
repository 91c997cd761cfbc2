package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

const identityHint = "every document must be a Kubernetes object with apiVersion, kind and metadata.name"

// document is the text of one document of an input, trimmed and ready to be
// validated.
type document struct {
	source string
	index  int    // 1-based, among the documents of source
	body   []byte // trimmed, ends in one "\n"
	// untrimmed is the text before trimming, to check that trimming changed
	// nothing YAML reads.
	untrimmed []byte
	line      int // line in the input of the text's first line
	removed   int // 1-based line of the text taken out of body (Parse's "# Source:"), 0 if none
}

// inputLine maps a 1-based line of body to a line of the input.
func (d *document) inputLine(bodyLine int) int {
	if d.removed > 0 && bodyLine >= d.removed {
		bodyLine++
	}
	return d.line + bodyLine - 1
}

// start is the line in the input of the document's first non-blank line.
func (d *document) start() int {
	return d.inputLine(leadingBlankLines(d.body) + 1)
}

func (d *document) fail(field, problem, hint string) *InputError {
	return &InputError{File: d.source, Document: d.index, Line: d.start(), Field: field, Problem: problem, Hint: hint}
}

// object validates the document and returns it as an Object. expanded
// counts the nodes the release's aliases add once expanded: the document's
// are added to it.
func (d *document) object(expanded *int64) (Object, error) {
	root, err := decode(d.body)
	if err != nil {
		return Object{}, d.yamlError(err)
	}
	if root.Kind != yaml.MappingNode {
		return Object{}, d.fail("", "must be a mapping (a Kubernetes object), not "+describe(root), identityHint)
	}
	// Before anything follows an alias, sops included: the decrypting
	// render (package secrets) parses a release before it decrypts anything.
	aliases := measureAliases(root)
	if at, problem := aliases.problem(); problem != "" {
		e := d.fail("", problem, aliasHint)
		e.Line = d.inputLine(at.Line)
		return Object{}, e
	}
	if *expanded += aliases.added; *expanded > maxReleaseAliasExpansion {
		return Object{}, d.fail("", fmt.Sprintf("with this document, the release's aliases expand to %d more nodes, more than the limit of %d per release", *expanded, maxReleaseAliasExpansion), aliasHint)
	}
	if field, problem := duplicateKey(root, nil); problem != "" {
		return Object{}, d.fail(field, problem, "YAML readers keep only one of them")
	}
	if err := d.checkTrim(root); err != nil {
		return Object{}, err
	}
	if err := d.checkOneObject(root); err != nil {
		return Object{}, err
	}
	o := Object{Source: d.source, Body: d.body, doc: d.index}
	if sops := directValue(root, "sops"); sops != nil {
		o.Encrypted = true
		err = d.encrypted(root, sops, &o)
	} else {
		err = d.plain(root, &o)
	}
	if err != nil {
		return Object{}, err
	}
	return o, nil
}

// decode parses body, which must hold exactly one YAML document.
func decode(body []byte) (root *yaml.Node, err error) {
	// The input comes from anyone who can push, and the bridge parses it in
	// a long-running process: a panic in the parser is one more invalid input.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("yaml: the parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(body))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("yaml: no YAML document")
		}
		return nil, err
	}
	// yaml.v3 also reads U+2028 and U+0085 as line breaks, so a document
	// marker can hide from split; a document that holds two is rejected
	// rather than cut short.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("yaml: more than one YAML document; documents are separated by a line holding only ---")
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("yaml: no YAML document")
	}
	return doc.Content[0], nil
}

func (d *document) yamlError(err error) *InputError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := d.start()
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				line, msg = d.inputLine(n), text
			}
		}
	}
	return &InputError{File: d.source, Document: d.index, Line: line, Problem: "invalid YAML: " + msg}
}

// checkTrim rejects a document whose last value is a block scalar (| or >)
// that trimming changed: trailing blank lines kept by |+, trailing spaces on
// its last line, or a final line break that was missing.
func (d *document) checkTrim(root *yaml.Node) error {
	if bytes.Equal(d.body, d.untrimmed) {
		return nil
	}
	last, field := lastScalar(root)
	if last == nil || last.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		return nil
	}
	if orig, err := decode(d.untrimmed); err == nil {
		if o, _ := lastScalar(orig); o != nil && o.Value == last.Value {
			return nil
		}
	}
	return d.fail(field, "the block scalar that ends the document would change: a release trims trailing blank lines and spaces and ends every document with one line break",
		"end it with a single line break and no trailing spaces, or use |- for a value without a final line break")
}

// lastScalar returns the scalar that ends the document's text, and its path.
func lastScalar(n *yaml.Node) (*yaml.Node, string) {
	var path []string
	for {
		switch n.Kind {
		case yaml.ScalarNode:
			return n, strings.Join(path, "")
		case yaml.MappingNode, yaml.SequenceNode:
			l := len(n.Content)
			if l == 0 {
				return nil, ""
			}
			path = append(path, segment(n, l-1, len(path) == 0))
			n = n.Content[l-1]
		default:
			return nil, ""
		}
	}
}

// segment names child i of n in a field path: ".key" or "[i]".
func segment(n *yaml.Node, i int, first bool) string {
	if n.Kind == yaml.SequenceNode {
		return "[" + strconv.Itoa(i) + "]"
	}
	key := "?"
	if k := n.Content[i&^1]; k.Kind == yaml.ScalarNode {
		key = k.Value
	}
	if first {
		return key
	}
	return "." + key
}

// duplicateKey finds a mapping key that is repeated anywhere in the tree
// under n: Kubernetes and kubectl reject it, and which value wins is
// anybody's guess. Aliases are not followed: their target is checked where it
// is defined.
func duplicateKey(n *yaml.Node, path []string) (field, problem string) {
	switch n.Kind {
	case yaml.MappingNode:
		seen := make(map[string]*yaml.Node, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if prev, ok := seen[k.Value]; ok {
				p := append(path, segment(n, i, len(path) == 0))
				return strings.Join(p, ""), fmt.Sprintf("key repeated on lines %d and %d", prev.Line, k.Line)
			}
			seen[k.Value] = k
		}
		for i := 1; i < len(n.Content); i += 2 {
			if f, p := duplicateKey(n.Content[i], append(path, segment(n, i, len(path) == 0))); p != "" {
				return f, p
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if f, p := duplicateKey(c, append(path, segment(n, i, false))); p != "" {
				return f, p
			}
		}
	}
	return "", ""
}

const listHint = "split it into separate documents, one object each, separated by a line holding only ---"

// checkOneObject refuses a document that is a list of objects rather than
// one: a top-level items list, found the way YAML-to-JSON conversion finds
// it (through aliases and << merges), or a kind ending in List. Argo CD's
// repo-server applies each item of any object whose items is a list as an
// object of its own (Unstructured.IsList), and so does kubectl, so the items
// would reach the cluster without any check of this release (the tenancy
// policy's included) having seen them. It holds for SOPS documents too: sops
// never encrypts keys or the shape of the tree, so an items list is one
// before and after decryption, and a kind that is itself encrypted is
// checked when the decrypted document is parsed.
func (d *document) checkOneObject(root *yaml.Node) error {
	if items := value(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
		return d.fail("items", fmt.Sprintf("a top-level items list (%d items) makes the document a list of objects, which Argo CD and kubectl apply one by one, unchecked by bucketops and its policy", len(items.Content)), listHint)
	}
	if kind, ok := stringValue(value(root, "kind")); ok && strings.HasSuffix(kind, "List") {
		return d.fail("kind", fmt.Sprintf("%q is a list of objects, not one object", kind), listHint)
	}
	return nil
}

// plain validates the identity of a document that isn't encrypted.
func (d *document) plain(root *yaml.Node, o *Object) error {
	var problem string
	if o.APIVersion, problem = requiredString(value(root, "apiVersion")); problem != "" {
		return d.fail("apiVersion", problem, identityHint)
	}
	if o.Kind, problem = requiredString(value(root, "kind")); problem != "" {
		return d.fail("kind", problem, identityHint)
	}
	md := value(root, "metadata")
	if md == nil || isNull(md) {
		return d.fail("metadata", "missing", identityHint)
	}
	if md.Kind != yaml.MappingNode {
		return d.fail("metadata", "must be a mapping, not "+describe(md), identityHint)
	}
	if o.Name, problem = requiredString(value(md, "name")); problem != "" {
		return d.fail("metadata.name", problem, identityHint)
	}
	if ns := value(md, "namespace"); ns != nil && !isNull(ns) {
		s, ok := stringValue(ns)
		if !ok {
			return d.fail("metadata.namespace", "must be a string, not "+describe(ns), "")
		}
		o.Namespace = s
	}
	return nil
}

// encrypted validates a SOPS document and takes its identity when it can be
// read: SOPS leaves apiVersion, kind and metadata in the clear when only data
// and stringData are encrypted (encrypted_regex: ^(data|stringData)$).
func (d *document) encrypted(root, sops *yaml.Node, o *Object) error {
	const hint = "a document with a top-level sops key must be encrypted by sops; encrypt it with sops, or remove the key"
	sops = resolve(sops)
	if sops.Kind != yaml.MappingNode {
		return d.fail("sops", "not a valid SOPS document: sops must be a mapping, not "+describe(sops), hint)
	}
	mac := value(sops, "mac")
	if s, ok := stringValue(mac); !ok || s == "" {
		problem := "not a valid SOPS document: the sops block has no mac"
		switch {
		case ok:
			problem = "not a valid SOPS document: the mac is empty"
		case mac != nil && !isNull(mac):
			problem = "not a valid SOPS document: the mac must be a string, not " + describe(mac)
		}
		return d.fail("sops.mac", problem, hint)
	}
	apiVersion, ok1 := readable(value(root, "apiVersion"))
	kind, ok2 := readable(value(root, "kind"))
	md := value(root, "metadata")
	name, ok3 := readable(value(md, "name"))
	namespace, ok4 := "", true
	if ns := value(md, "namespace"); ns != nil && !isNull(ns) {
		namespace, ok4 = readable(ns)
	}
	if ok1 && ok2 && ok3 && ok4 {
		o.APIVersion, o.Kind, o.Name, o.Namespace = apiVersion, kind, name, namespace
	}
	return nil
}

// readable returns the value of n if it is a string that is not encrypted.
func readable(n *yaml.Node) (string, bool) {
	s, ok := stringValue(n)
	if !ok || s == "" || (strings.HasPrefix(s, "ENC[") && strings.HasSuffix(s, "]")) {
		return "", false
	}
	return s, true
}

// requiredString returns the value of a field that must be a non-empty
// string, or what is wrong with it.
func requiredString(n *yaml.Node) (string, string) {
	if n == nil || isNull(n) {
		return "", "missing"
	}
	s, ok := stringValue(n)
	switch {
	case !ok:
		return "", "must be a string, not " + describe(n)
	case s == "":
		return "", "must not be empty"
	}
	return s, ""
}

// stringValue returns the value of a scalar that Kubernetes reads as a
// string. A plain scalar that looks like a timestamp is one: YAML-to-JSON
// conversion keeps it as the text.
func stringValue(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		return n.Value, true
	}
	return "", false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the type of n for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch tag := n.ShortTag(); tag {
		case "!!null":
			return "null"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!str":
			return "a string"
		default:
			return "a value tagged " + tag
		}
	}
	return "empty"
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// directValue returns the value of key in mapping m, ignoring merge keys:
// SOPS looks for its own key that way.
func directValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key && k.ShortTag() != "!!merge" {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// value returns the value of key in mapping m, following aliases and merge
// keys (<<) the way YAML-to-JSON conversion does: a key of m itself wins over
// a merged one, and earlier merged mappings win over later ones.
func value(m *yaml.Node, key string) *yaml.Node {
	return lookup(m, key, map[*yaml.Node]int{})
}

// lookup searches each mapping at most once; visits counts the times it
// reached each one. A mapping already searched didn't hold the key then and
// doesn't now, so merges that name the same anchors over and over cost the
// number of merge references, not the number of paths through them (10^9
// for nine levels of ten), and a mapping that merges itself ends the search.
func lookup(m *yaml.Node, key string, visits map[*yaml.Node]int) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	if visits[m]++; visits[m] > 1 {
		return nil
	}
	if v := directValue(m, key); v != nil {
		return v
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			continue
		}
		src := resolve(m.Content[i+1])
		if src == nil {
			continue
		}
		if src.Kind == yaml.SequenceNode {
			for _, s := range src.Content {
				if v := lookup(s, key, visits); v != nil {
					return v
				}
			}
			continue
		}
		if v := lookup(src, key, visits); v != nil {
			return v
		}
	}
	return nil
}

// Limits on aliases. We never expand them, but Argo CD and kubectl do when
// they convert YAML to JSON, and sops does when it reads an encrypted
// document: nine levels of ten aliases are 90 aliases and a billion nodes.
// Kubernetes manifests rarely use anchors (helm template and kustomize build
// never write them; a hand-written manifest may share a block of labels or
// resources between a few objects), so the limits leave room for that and
// refuse a document that would be many times its size once expanded.
const (
	// maxAliases is the number of aliases (*name, including the ones a <<
	// merge names) a document may use. Merge keys need no limit of their
	// own: one that names no anchor merges a mapping written in place,
	// which adds nothing once expanded.
	maxAliases = 100
	// maxAliasExpansion bounds the nodes a document's aliases add once
	// expanded: a hundred uses of a 100-node block.
	maxAliasExpansion = 10_000
	// maxReleaseAliasExpansion bounds the same over a release, which may
	// hold thousands of documents each under the limit above: about the
	// nodes of a release of MaxReleaseBytes that has no aliases, so that
	// aliases can at most double what a release costs to expand.
	maxReleaseAliasExpansion = 1_000_000
)

const aliasHint = "expand the anchors (*alias, <<: merges) in the manifest: helm template and kustomize build never write them"

// aliasUse is what a document's aliases cost once expanded, measured in one
// walk of its tree.
type aliasUse struct {
	aliases int
	// added is the nodes the aliases add once expanded.
	added int64
	// sizes holds the expanded size of each anchored node walked, and
	// inProgress while its own subtree is being walked.
	sizes map[*yaml.Node]int64
	// cycle is the first alias inside the node it names, overCount the
	// first alias past maxAliases, overSize the alias that took added past
	// maxAliasExpansion.
	cycle, overCount, overSize *yaml.Node
}

const (
	inProgress = -1
	// sizeCap keeps sizes from overflowing: a hundred aliases can name
	// 2^100 nodes.
	sizeCap = 1 << 50
)

// measureAliases walks the tree under root once, in document order. An
// alias always comes after the anchor it names, so the expanded size of
// its target is known when the alias is reached, or the target is still
// being walked and the alias is inside it.
func measureAliases(root *yaml.Node) *aliasUse {
	u := &aliasUse{}
	u.size(root)
	return u
}

// size returns the number of nodes of n once its aliases are expanded.
func (u *aliasUse) size(n *yaml.Node) int64 {
	if n.Kind == yaml.AliasNode {
		u.aliases++
		if u.aliases == maxAliases+1 {
			u.overCount = n
		}
		s, ok := u.sizes[n.Alias]
		if !ok || s == inProgress {
			if u.cycle == nil {
				u.cycle = n
			}
			return 1
		}
		u.added = min(u.added+s-1, sizeCap)
		if u.added > maxAliasExpansion && u.overSize == nil {
			u.overSize = n
		}
		return s
	}
	if n.Anchor != "" {
		if u.sizes == nil {
			u.sizes = map[*yaml.Node]int64{}
		}
		u.sizes[n] = inProgress
	}
	var s int64 = 1
	for _, c := range n.Content {
		s = min(s+u.size(c), sizeCap)
	}
	if n.Anchor != "" {
		u.sizes[n] = s
	}
	return s
}

// problem says what is wrong with the document's aliases, and which alias
// is at fault; nil if nothing is.
func (u *aliasUse) problem() (*yaml.Node, string) {
	switch {
	case u.cycle != nil:
		return u.cycle, fmt.Sprintf("the alias *%s is inside the node it names, so it expands without end", u.cycle.Value)
	case u.overCount != nil:
		return u.overCount, fmt.Sprintf("the document uses %d aliases, more than the limit of %d per document", u.aliases, maxAliases)
	case u.overSize != nil:
		added := strconv.FormatInt(u.added, 10)
		if u.added >= sizeCap {
			added = "over " + added
		}
		return u.overSize, fmt.Sprintf("the document's aliases expand to %s more nodes, more than the limit of %d per document", added, maxAliasExpansion)
	}
	return nil, ""
}
