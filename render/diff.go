package render

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
	"gopkg.in/yaml.v3"
)

// Change kinds of an ObjectChange.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// ObjectChange is one Kubernetes object that differs between two releases.
type ObjectChange struct {
	// Object is the object as people read it ("Deployment prod/api").
	Object string `json:"object"`
	// Change is Added, Removed or Changed.
	Change string `json:"change"`
	Source string `json:"source"`
	// Encrypted reports whether either side is a SOPS document: its values
	// are compared by ciphertext, never decrypted.
	Encrypted bool `json:"encrypted"`
	// Diff is the unified diff of the object's text, as show gave it.
	Diff string `json:"diff"`
}

// DiffObjects compares two releases' objects, matched by Key, and returns
// the ones added, removed or changed, sorted by key, and how many are the
// same. show gives the text an object is compared and shown as: its Body,
// or Redacted for eyes that may not see Secret values. fromLabel and
// toLabel name the releases in the diffs' headers.
func DiffObjects(fromLabel string, from []Object, toLabel string, to []Object, show func(Object) []byte) ([]ObjectChange, int) {
	old := make(map[string]Object, len(from))
	for _, o := range from {
		old[o.Key()] = o
	}
	cur := make(map[string]Object, len(to))
	for _, o := range to {
		cur[o.Key()] = o
	}
	keys := make([]string, 0, len(old)+len(cur))
	for k := range old {
		keys = append(keys, k)
	}
	for k := range cur {
		if _, ok := old[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	changes := []ObjectChange{}
	unchanged := 0
	for _, k := range keys {
		o, inOld := old[k]
		n, inNew := cur[k]
		var before, after []byte
		c := ObjectChange{Change: Changed}
		switch {
		case !inOld:
			c.Change, after = Added, show(n)
			c.Object, c.Source, c.Encrypted = n.String(), n.Source, n.Encrypted
		case !inNew:
			c.Change, before = Removed, show(o)
			c.Object, c.Source, c.Encrypted = o.String(), o.Source, o.Encrypted
		case bytes.Equal(o.Body, n.Body):
			unchanged++
			continue
		default:
			before, after = show(o), show(n)
			c.Object, c.Source, c.Encrypted = n.String(), n.Source, n.Encrypted || o.Encrypted
		}
		c.Diff = udiff.Unified(fromLabel+" "+c.Object, toLabel+" "+c.Object, string(before), string(after))
		changes = append(changes, c)
	}
	return changes, unchanged
}

// redactKey makes the marks of plaintext values: equal values in one
// process get equal marks, so a diff shows that a value changed, but a mark
// can't be checked against a guessed value outside it.
var redactKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// Redacted returns the object's text with no Secret value in it, for pages
// auditors read: every scalar under the data and stringData of a Secret
// (or of a SOPS document whose kind is encrypted), once aliases and <<
// merges are followed, and every SOPS-encrypted value (ENC[…]) anywhere
// else, is replaced by a mark. A SOPS value becomes "<redacted sha256:…>",
// a prefix of its ciphertext's hash, so a changed value shows as changed,
// and nothing of its length shows; any other value becomes
// "<redacted hmac:…>", a keyed hash. That covers the values a partly
// encrypted Secret keeps in the clear (sops' encrypted_regex or
// unencrypted_suffix), and an anchor a Secret's value names is marked
// where it is defined too. Comments under data and stringData are
// dropped. Nothing is ever decrypted. An object whose text can't be read
// back is shown as one line saying so, never as it is.
func (o Object) Redacted() []byte {
	root, err := decode(o.Body)
	if err != nil {
		return []byte("# (this document can't be shown: it doesn't parse)\n")
	}
	secret := o.Kind == "Secret" && !strings.Contains(o.APIVersion, "/")
	if !o.Encrypted && !secret {
		return o.Body
	}
	if secret || o.opaque() {
		redactSecretValues(root)
	}
	redactEncrypted(root)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return []byte("# (this document can't be shown)\n")
	}
	return b.Bytes()
}

// redactSecretValues marks every scalar under the data and stringData
// fields of the Secret root: its own, and the ones << merges bring in,
// even those that YAML-to-JSON conversion overrides, since their text is
// shown all the same. Inside those fields it follows aliases and merges
// to the nodes they name and marks those, where they are written.
func redactSecretValues(root *yaml.Node) {
	done := map[*yaml.Node]bool{}
	var values func(n *yaml.Node)
	values = func(n *yaml.Node) {
		if n == nil || done[n] {
			return
		}
		done[n] = true
		n.HeadComment, n.LineComment, n.FootComment = "", "", ""
		switch n.Kind {
		case yaml.AliasNode:
			values(n.Alias)
		case yaml.ScalarNode:
			redactValue(n)
		case yaml.SequenceNode:
			for _, c := range n.Content {
				values(c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				// A key names a value (or, for <<, merges one in); a key
				// that is itself a mapping or a list is marked whole.
				if k := n.Content[i]; k.Kind == yaml.MappingNode || k.Kind == yaml.SequenceNode {
					values(k)
				} else {
					k.HeadComment, k.LineComment, k.FootComment = "", "", ""
				}
				values(n.Content[i+1])
			}
		}
	}
	fields := map[*yaml.Node]bool{}
	var object func(m *yaml.Node)
	object = func(m *yaml.Node) {
		m = resolve(m)
		if m == nil || fields[m] {
			return
		}
		fields[m] = true
		switch m.Kind {
		case yaml.SequenceNode: // << merges a list of mappings
			for _, c := range m.Content {
				object(c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(m.Content); i += 2 {
				k := resolve(m.Content[i])
				switch {
				case k == nil || k.Kind != yaml.ScalarNode:
				case k.ShortTag() == "!!merge":
					object(m.Content[i+1])
				case k.Value == "data" || k.Value == "stringData":
					values(m.Content[i+1])
				}
			}
		}
	}
	object(root)
}

// redactValue replaces a scalar of a Secret's values with its mark.
func redactValue(n *yaml.Node) {
	if isEncrypted(n.Value) {
		redactEncrypted(n)
		return
	}
	mac := hmac.New(sha256.New, redactKey)
	mac.Write([]byte(n.Value))
	redact(n, "<redacted hmac:"+hex.EncodeToString(mac.Sum(nil))[:8]+">")
}

func isEncrypted(s string) bool { return strings.HasPrefix(s, "ENC[") && strings.HasSuffix(s, "]") }

// redactEncrypted replaces every ENC[…] scalar under n.
func redactEncrypted(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if isEncrypted(n.Value) {
			sum := sha256.Sum256([]byte(n.Value))
			redact(n, "<redacted sha256:"+hex.EncodeToString(sum[:])[:12]+">")
		}
		return
	}
	for _, c := range n.Content {
		redactEncrypted(c)
	}
}

func redact(n *yaml.Node, mark string) {
	n.Value, n.Tag, n.Style = mark, "!!str", 0
	n.LineComment, n.HeadComment, n.FootComment = "", "", ""
}
