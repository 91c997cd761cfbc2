package render_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
)

// mergeBomb is the review's reproduction of hole 4: levels of anchors, each
// merging the one below branch times, and metadata merging the top one, so
// that looking up a key metadata doesn't hold (namespace) walked every path
// through the merges before the fix: branch^levels of them.
func mergeBomb(levels, branch int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nl0: &l0 {k: v}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {<<: [%s]}\n", i, i, aliases(fmt.Sprint("l", i-1), branch))
	}
	fmt.Fprintf(&b, "metadata:\n  <<: [%s]\n  name: bomb\n", aliases(fmt.Sprint("l", levels), branch))
	return b.String()
}

// laughs is a billion laughs under a ConfigMap's identity: levels of lists
// of branch aliases of the list below.
func laughs(identity string, levels, branch int) string {
	var b strings.Builder
	b.WriteString(identity + `l0: &l0 "lol"` + "\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, aliases(fmt.Sprint("l", i-1), branch))
	}
	return b.String()
}

// aliases returns n aliases of anchor, separated by commas.
func aliases(anchor string, n int) string {
	return strings.TrimSuffix(strings.Repeat("*"+anchor+",", n), ",")
}

func TestMergeBombsAreRefusedAtOnce(t *testing.T) {
	doc := mergeBomb(7, 10)
	if len(doc) > 646 {
		t.Fatalf("the reproduction is %d bytes, the review's was 646", len(doc))
	}
	// Before the fix this took a second (3.4 s for the review's 646 bytes,
	// days for 2 KB) and then succeeded. The aliases of l4, on line 7, take
	// the document past the limit.
	t.Run("push", func(t *testing.T) {
		_, err := render.AssembleStream("bomb.yaml", strings.NewReader(doc))
		checkInputError(t, err, reject{file: "bomb.yaml", document: 1, says: []string{
			"(line 7)", "the document's aliases expand to 370370260 more nodes", "more than the limit of 10000 per document", "expand the anchors",
		}})
	})
	t.Run("render", func(t *testing.T) {
		d, err := secrets.NewDecrypter(nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Render([]byte("# Source: bomb.yaml\n"+doc), secrets.Options{App: "prod/bomb"})
		checkInputError(t, err, reject{file: "bomb.yaml", document: 1, says: []string{"(line 8)", "aliases expand to"}})
	})
}

func TestAliasLimits(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	t.Run("a hand-written manifest with a few anchors passes, merged metadata read", func(t *testing.T) {
		doc := "apiVersion: v1\nkind: ConfigMap\nmeta: &m {namespace: pay, name: base}\nmetadata: {<<: *m, name: x}\n" +
			"defaults: &d {cpu: 100m, memory: 128Mi}\ndata:\n  a: &v value\n  b: *v\nresources:\n  api: {<<: *d, cpu: 200m}\n  web: {<<: *d}\n"
		rel, err := render.AssembleStream("ok.yaml", strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		if o := rel.Objects[0]; o.Name != "x" || o.Namespace != "pay" {
			t.Errorf("the object is %s, want ConfigMap pay/x: its own name, the merged namespace", o)
		}
	})

	t.Run("too many aliases: the first one past the limit is named", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(cm + "anchor: &v x\nlist:\n")
		for range 101 {
			b.WriteString("  - *v\n")
		}
		_, err := render.AssembleStream("many.yaml", strings.NewReader(b.String()))
		checkInputError(t, err, reject{file: "many.yaml", document: 1, says: []string{
			"(line 107)", "the document uses 101 aliases, more than the limit of 100 per document", "expand the anchors",
		}})
	})

	t.Run("a billion laughs, under the alias count", func(t *testing.T) {
		_, err := render.AssembleStream("laughs.yaml", strings.NewReader(laughs(cm, 9, 10)))
		checkInputError(t, err, reject{file: "laughs.yaml", document: 1, says: []string{
			"(line 9)", "the document's aliases expand to 1234567800 more nodes",
		}})
	})

	t.Run("fifty levels of two laughs", func(t *testing.T) {
		// 2^50 nodes from 100 aliases: the count saturates rather than
		// overflow.
		_, err := render.AssembleStream("laughs.yaml", strings.NewReader(laughs(cm, 50, 2)))
		checkInputError(t, err, reject{file: "laughs.yaml", document: 1, says: []string{
			"(line 17)", "the document's aliases expand to over 1125899906842624 more nodes",
		}})
	})

	t.Run("a few laughs under the limits pass", func(t *testing.T) {
		if _, err := render.AssembleStream("laughs.yaml", strings.NewReader(laughs(cm, 3, 10))); err != nil {
			t.Error(err)
		}
	})

	for name, doc := range map[string]string{
		"a list holding itself":    cm + "data: &x [a, *x]\n",
		"a mapping merging itself": "apiVersion: v1\nkind: ConfigMap\nmetadata: &x\n  name: x\n  <<: *x\n",
	} {
		t.Run(name+" expands without end", func(t *testing.T) {
			_, err := render.AssembleStream("self.yaml", strings.NewReader(doc))
			checkInputError(t, err, reject{file: "self.yaml", document: 1, says: []string{"(line 5)", "the alias *x is inside the node it names"}})
		})
	}

	t.Run("a release of documents each under the limits, too many in all", func(t *testing.T) {
		// 99 aliases of a 101-node list add 9,900 nodes; the 102nd
		// document takes the release past 1,000,000.
		var b strings.Builder
		for i := range 102 {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\nblock: &b [%s]\nuses: [%s]\n",
				i, strings.TrimSuffix(strings.Repeat("x,", 100), ","), aliases("b", 99))
		}
		stream := b.String()
		_, err := render.AssembleStream("stdin", strings.NewReader(stream))
		checkInputError(t, err, reject{file: "stdin", document: 102, says: []string{
			"with this document, the release's aliases expand to 1009800 more nodes, more than the limit of 1000000 per release",
		}})
		last := strings.LastIndex(stream, "---\n")
		if _, err := render.AssembleStream("stdin", strings.NewReader(stream[:last])); err != nil {
			t.Errorf("101 documents: %v", err)
		}
	})

	t.Run("an encrypted document is refused before sops reads it", func(t *testing.T) {
		// sops expands every alias of a document it loads: this one, had it
		// got there, would fail yaml.v3's excessive aliasing check and come
		// back as a DecryptError.
		keys := sopstest.NewAgeKeys(t, 1)
		secret := string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  p: x\n", keys[0].Recipient().String()))
		d, err := secrets.NewDecrypter(sopstest.KeyFile(keys...))
		if err != nil {
			t.Fatal(err)
		}
		checked := false
		_, err = d.Render([]byte("# Source: s.yaml\n"+laughs(secret, 9, 10)), secrets.Options{
			App:   "prod/s",
			Check: func([]render.Object) error { checked = true; return nil },
		})
		var de *secrets.DecryptError
		if errors.As(err, &de) || checked {
			t.Fatalf("%v; want the alias limit's InputError, before any decryption", err)
		}
		checkInputError(t, err, reject{file: "s.yaml", document: 1, says: []string{"aliases expand to", "expand the anchors"}})
	})
}
