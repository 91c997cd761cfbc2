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
// auditors read: every SOPS-encrypted value (ENC[…]) becomes
// "<redacted sha256:…>" (a prefix of its ciphertext's hash, so a changed
// value shows as changed), and the values under data and stringData of a
// Secret that isn't encrypted become "<redacted hmac:…>", a keyed
// hash. Nothing is ever decrypted. An object whose text can't be read back
// is shown as one line saying so, never as it is.
func (o Object) Redacted() []byte {
	root, err := decode(o.Body)
	if err != nil {
		return []byte("# (this document can't be shown: it doesn't parse)\n")
	}
	secret := o.Kind == "Secret" && !strings.Contains(o.APIVersion, "/")
	if !o.Encrypted && !secret {
		return o.Body
	}
	redactEncrypted(root)
	if secret && !o.Encrypted && root.Kind == yaml.MappingNode {
		for _, field := range []string{"data", "stringData"} {
			if m := directValue(root, field); m != nil && m.Kind == yaml.MappingNode {
				for i := 1; i < len(m.Content); i += 2 {
					if v := m.Content[i]; v.Kind == yaml.ScalarNode {
						mac := hmac.New(sha256.New, redactKey)
						mac.Write([]byte(v.Value))
						redact(v, "<redacted hmac:"+hex.EncodeToString(mac.Sum(nil))[:8]+">")
					}
				}
			}
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return []byte("# (this document can't be shown)\n")
	}
	return b.Bytes()
}

// redactEncrypted replaces every ENC[…] scalar under n.
func redactEncrypted(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if strings.HasPrefix(n.Value, "ENC[") && strings.HasSuffix(n.Value, "]") {
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
