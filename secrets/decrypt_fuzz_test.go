package secrets_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
)

// fuzzKey is a throwaway age identity, public key
// age1v7hr4eyq3yhf3lyxm5y44nh23nzdsjcml5zeq7zlt7fscpy7yqlsmlzkny: the seed
// corpus in testdata/fuzz/FuzzDecrypt is encrypted for it, so mutations of
// it get past the data key to the values and the MAC.
const fuzzKey = "AGE-SECRET-KEY-1ZFC0RH2QLCR476RZZKTTGESK9Q6350VY88724TMANDEA85ZEFR9QY9QPWQ"

// FuzzDecrypt renders mutations of releases holding SOPS documents: Render
// may not panic, every failure is an ErrDecrypt or an ErrInvalid, and what
// it renders is a valid release, with nothing left encrypted, the same
// every time.
func FuzzDecrypt(f *testing.F) {
	// A mutation can name a GCP KMS key: no credentials, so it fails at once
	// rather than probing for a metadata server.
	f.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
	d, err := secrets.NewDecrypter([]byte(fuzzKey))
	if err != nil {
		f.Fatal(err)
	}
	me := d.Recipients()[0]
	secret := encryptSecret(f, dbSecret, me)
	opaque, _ := sopsEncrypt(f, settings, "", me)
	f.Add(secret)
	f.Add(releaseStream(relDoc{Source: "app.yaml", Body: api}, relDoc{Source: "secret.yaml", Body: string(secret)}, relDoc{Source: "cm.yaml", Body: string(opaque)}))
	// A document whose encrypted kind says, once decrypted, that it is a
	// list of objects, which the render must refuse.
	opaqueList, _ := sopsEncrypt(f, "apiVersion: v1\nkind: SecretList\nmetadata:\n  name: l\n", "", me)
	f.Add(releaseStream(relDoc{Source: "app.yaml", Body: api}, relDoc{Source: "list.yaml", Body: string(opaqueList)}))

	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := renderBytes(d, data, false)
		if err != nil {
			if !errors.Is(err, secrets.ErrDecrypt) && !errors.Is(err, render.ErrInvalid) {
				t.Fatalf("rejected with %v, neither an ErrDecrypt nor an ErrInvalid", err)
			}
			if out != nil {
				t.Fatalf("a failed render returned %q", out)
			}
			return
		}
		in, err := render.Parse(data)
		if err != nil {
			t.Fatalf("rendered a release that doesn't parse: %v", err)
		}
		rel, err := render.Parse(out)
		if err != nil {
			t.Fatalf("the rendered stream doesn't parse: %v\n%s", err, out)
		}
		if len(rel.Objects) != len(in.Objects) {
			t.Fatalf("%d objects rendered from %d", len(rel.Objects), len(in.Objects))
		}
		for _, o := range rel.Objects {
			if o.Encrypted {
				t.Fatalf("%s is still encrypted", o)
			}
		}
		if again, err := renderBytes(d, data, false); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("a second render differs: %v", err)
		}
	})
}
