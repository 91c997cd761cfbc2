package provenance_test

import (
	"strings"
	"testing"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// VerifyChain against the rollback floor: a tail deleted and an older
// release copied back verify link by link, and only the floor tells.
func TestVerifyChainAgainstTheFloor(t *testing.T) {
	b := storetest.New(t, true)
	s := b.Store(t, "")
	priv, pub := keyFiles(t)
	signer, err := provenance.LoadSigner(t.Context(), priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := trusted(t, "ci", pub)
	var hist []store.Release
	for n := 1; n <= 5; n++ {
		hist = append(hist, publish(t, s, signer, "app/x", n))
	}
	findings := verifyChain(t, keys, s, "app/x", 5)
	if findings[3].Replaced != hist[2].Generation {
		t.Errorf("release 4 replaced %d, want %d", findings[3].Replaced, hist[2].Generation)
	}
	mark := floor.Mark{App: "app/x", Generation: hist[4].Generation, Digest: hist[4].Digest}
	chain := func() []provenance.Finding {
		t.Helper()
		f, err := keys.VerifyChain(t.Context(), s, "app/x", provenance.ChainOptions{Floor: mark})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := chain(); len(f) != 5 || !f[4].OK() {
		t.Fatalf("an intact chain under its floor: %+v", f)
	}

	object := "app/x/manifests.yaml"
	b.CopyObject(t, object, hist[1].Generation, "kept")
	for _, r := range hist[1:] {
		b.DeleteGeneration(t, object, r.Generation)
	}
	b.CopyObject(t, "kept", 0, object)
	if f, err := keys.VerifyChain(t.Context(), s, "app/x", provenance.ChainOptions{}); err != nil || len(f) != 2 || !f[0].OK() || !f[1].OK() {
		t.Fatalf("without the floor the rolled back chain verifies (that is the hole): %+v %v", f, err)
	}
	f := chain()
	if len(f) != 3 {
		t.Fatalf("%d findings, want the 2 releases and the deleted floor: %+v", len(f), f)
	}
	if f[1].Problem != provenance.Rollback || !strings.Contains(f[1].Detail, "copied back") {
		t.Errorf("the copied-back head: %s", f[1].Error())
	}
	if f[2].Problem != provenance.Truncated || f[2].Generation != hist[4].Generation {
		t.Errorf("the deleted floor release: %s", f[2].Error())
	}
}
