package render_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/bucketops/bucketops/render"
)

// FuzzAssemble feeds arbitrary streams to AssembleStream and Parse: neither
// may panic, every rejection is an ErrInvalid, and whatever is accepted
// parses back to the same objects.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte(cmA))
	f.Add([]byte(deploy + "---\n" + cmA))
	f.Add([]byte("--- {apiVersion: v1, kind: A, metadata: {name: x}}\n...\n"))
	f.Add([]byte("a: &x [*x]\n"))
	if secret, err := os.ReadFile("testdata/secret.sops.yaml"); err == nil {
		f.Add(secret)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := render.Parse(data); err != nil && !errors.Is(err, render.ErrInvalid) {
			t.Fatalf("Parse rejected with %v, not an ErrInvalid", err)
		}
		rel, err := render.AssembleStream("stdin", bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, render.ErrInvalid) {
				t.Fatalf("AssembleStream rejected with %v, not an ErrInvalid", err)
			}
			return
		}
		back, err := render.Parse(rel.Bytes)
		if err != nil {
			t.Fatalf("an assembled stream doesn't parse: %v\n%q", err, rel.Bytes)
		}
		if back.Digest != rel.Digest || !reflect.DeepEqual(back.Objects, rel.Objects) {
			t.Fatalf("round trip changed the objects:\n%+v\n%+v", back.Objects, rel.Objects)
		}
	})
}
