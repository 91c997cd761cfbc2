package render_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
)

// mergeBomb is the review's reproduction of hole 4: levels of anchors, each
// merging the one below branch times, and metadata merging the top one, so
// that looking up a key metadata doesn't hold (namespace) walked every path
// through the merges before the fix: branch^levels of them.
func mergeBomb(levels, branch int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nl0: &l0 {k: v}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), branch), ","))
	}
	fmt.Fprintf(&b, "metadata:\n  <<: [%s]\n  name: bomb\n", strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", levels), branch), ","))
	return b.String()
}

func TestMergeBombsAreRefusedAtOnce(t *testing.T) {
	doc := mergeBomb(7, 10)
	if len(doc) > 700 {
		t.Fatalf("the reproduction is %d bytes, the review's was 646", len(doc))
	}
	// Before the fix this took seconds (3.4 s for the review's 646 bytes,
	// days for 2 KB) and then succeeded.
	for name, parse := range map[string]func() error{
		"push": func() error { _, err := render.AssembleStream("bomb.yaml", strings.NewReader(doc)); return err },
		"render": func() error {
			d, err := render.NewDecrypter(nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Render([]byte("# Source: bomb.yaml\n"+doc), render.Options{App: "prod/bomb"})
			return err
		},
	} {
		err := parse()
		var ie *render.InputError
		if !errors.As(err, &ie) || ie.File != "bomb.yaml" || ie.Document != 1 || !strings.Contains(err.Error(), "aliases expand to") || !strings.Contains(err.Error(), "expand the anchors") {
			t.Errorf("%s of the merge bomb: %v; want an InputError naming the file, the document, the limit and what to do", name, err)
		}
	}
}

func TestAliasLimits(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	t.Run("a hand-written manifest with a few anchors passes", func(t *testing.T) {
		doc := cm + "defaults: &d {cpu: 100m, memory: 128Mi}\ndata:\n  a: &v value\n  b: *v\nresources:\n  api: {<<: *d, cpu: 200m}\n  web: {<<: *d}\n"
		rel, err := render.AssembleStream("ok.yaml", strings.NewReader(doc))
		if err != nil || len(rel.Objects) != 1 || rel.Objects[0].Name != "x" {
			t.Errorf("%v %+v", err, rel)
		}
	})
	t.Run("too many aliases", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(cm + "anchor: &v x\nlist:\n")
		for range 101 {
			b.WriteString("  - *v\n")
		}
		_, err := render.AssembleStream("many.yaml", strings.NewReader(b.String()))
		if !errors.Is(err, render.ErrInvalid) || !strings.Contains(err.Error(), "101 aliases, more than the limit of 100") {
			t.Errorf("%v", err)
		}
	})
	t.Run("a billion laughs, under the alias count", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(cm + `l0: &l0 "lol"` + "\n")
		for i := 1; i <= 9; i++ {
			fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
		}
		_, err := render.AssembleStream("laughs.yaml", strings.NewReader(b.String()))
		if !errors.Is(err, render.ErrInvalid) || !strings.Contains(err.Error(), "aliases expand to") {
			t.Errorf("%v", err)
		}
	})
	t.Run("an encrypted document is refused before sops reads it", func(t *testing.T) {
		keys := sopstest.NewAgeKeys(t, 1)
		secret := string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  p: x\n", keys[0].Recipient().String()))
		var b strings.Builder
		b.WriteString(secret + `l0: &l0 "lol"` + "\n")
		for i := 1; i <= 9; i++ {
			fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
		}
		d, err := render.NewDecrypter(sopstest.KeyFile(keys...))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Render([]byte("# Source: s.yaml\n"+b.String()), render.Options{App: "prod/s"})
		var de *render.DecryptError
		if errors.As(err, &de) || !errors.Is(err, render.ErrInvalid) || !strings.Contains(err.Error(), "aliases expand to") {
			t.Errorf("%v; want the alias limit's InputError, before any decryption", err)
		}
	})
}
