package render_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/bucketops/bucketops/render"
)

// FuzzAssemble feeds arbitrary bytes to AssembleStream and Parse. Neither may
// panic, every rejection wraps ErrInvalid, and an assembled release parses
// back to the same objects and digest.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte(configMap("prod", "a") + "---\n" + configMap("prod", "b")))
	f.Add([]byte("--- --- {apiVersion: v1, kind: A, metadata: {name: x}}\n... # end\n"))
	f.Add([]byte("apiVersion: v1\nkind: A\nmetadata: &m {name: x}\nspec: {<<: *m}\n---\na: &x [*x]\n"))
	f.Add([]byte(mergeBomb(3, 4)))
	f.Add([]byte("apiVersion: v1\nkind: A\nmetadata: &m {name: x, <<: *m}\n"))
	f.Add([]byte("# Source: chart/a.yaml\n" + configMap("", "a") + "  s: |+\n    x\n\n"))
	// Documents that are lists of objects (items, or a kind ending in List).
	f.Add([]byte(configMap("team-b", "wrapper") + "items:\n" + wrapped))
	f.Add([]byte("apiVersion: v1\nkind: List\nmetadata: {name: l}\nitems: []\n---\napiVersion: v1\nkind: PodList\nmetadata: {name: p}\n"))
	f.Add([]byte(configMap("", "m") + "<<: {items: &i [{apiVersion: v1, kind: Secret, metadata: {name: s}}]}\n---\n" + configMap("", "n") + "items: *i\n"))
	if secret, err := os.ReadFile("testdata/secret.sops.yaml"); err == nil {
		f.Add(secret)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if parsed, err := render.Parse(data); err != nil {
			if !errors.Is(err, render.ErrInvalid) {
				t.Fatalf("Parse failed with %v, not an ErrInvalid", err)
			}
		} else if parsed.Digest != render.Digest(data) {
			t.Fatalf("Parse gave digest %s for data with digest %s", parsed.Digest, render.Digest(data))
		}
		rel, err := render.AssembleStream("stdin", bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, render.ErrInvalid) {
				t.Fatalf("AssembleStream failed with %v, not an ErrInvalid", err)
			}
			return
		}
		if rel.Resources() == 0 || rel.Digest != render.Digest(rel.Bytes) {
			t.Fatalf("release of %d objects with digest %s", rel.Resources(), rel.Digest)
		}
		back, err := render.Parse(rel.Bytes)
		if err != nil {
			t.Fatalf("the assembled stream doesn't parse: %v\n%q", err, rel.Bytes)
		}
		if back.Digest != rel.Digest || !reflect.DeepEqual(back.Objects, rel.Objects) {
			t.Fatalf("the round trip changed the objects:\n%+v\nwant:\n%+v", back.Objects, rel.Objects)
		}
	})
}
