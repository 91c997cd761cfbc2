// Package sopstest makes SOPS-encrypted documents and age keys at test time
// with the sops library, the way `sops encrypt` does (cmd/sops/encrypt.go and
// common.EncryptTree), so tests hold no fixture that could drift from what
// sops writes.
package sopstest

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/gcpkms"
	"github.com/getsops/sops/v3/keyservice"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

// SecretsRegex is what a Kubernetes Secret is usually encrypted with: its
// identity stays readable, its values don't.
const SecretsRegex = "^(data|stringData)$"

// sopsVersion is the version of the sops module in go.mod.
const sopsVersion = "3.13.3"

// NewAgeKeys generates n age identities.
func NewAgeKeys(t testing.TB, n int) []*age.X25519Identity {
	t.Helper()
	ids := make([]*age.X25519Identity, n)
	for i := range ids {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// KeyFile writes identities the way age-keygen does.
func KeyFile(ids ...*age.X25519Identity) []byte {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString("# created: 2026-01-02T03:04:05Z\n")
		b.WriteString("# public key: " + id.Recipient().String() + "\n")
		b.WriteString(id.String() + "\n\n")
	}
	return []byte(b.String())
}

// Recipients returns the public keys of identities.
func Recipients(ids ...*age.X25519Identity) []string {
	r := make([]string, len(ids))
	for i, id := range ids {
		r[i] = id.Recipient().String()
	}
	return r
}

// EncryptSecret encrypts a YAML document for age recipients, values under
// data and stringData only, as `sops encrypt --age R1,R2
// --encrypted-regex '^(data|stringData)$'` does.
func EncryptSecret(t testing.TB, plainYAML string, recipients ...string) []byte {
	t.Helper()
	doc, _ := Encrypt(t, plainYAML, SecretsRegex, recipients...)
	return doc
}

// Encrypt encrypts a YAML document for age recipients under encryptedRegex
// ("" for sops' default: every value) and also returns the data key, for
// tests that forge what only a key holder could write.
func Encrypt(t testing.TB, plainYAML, encryptedRegex string, recipients ...string) (doc, dataKey []byte) {
	t.Helper()
	var group sops.KeyGroup
	for _, r := range recipients {
		key, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			t.Fatal(err)
		}
		group = append(group, key)
	}
	return encrypt(t, plainYAML, encryptedRegex, group, func(tree *sops.Tree) []byte {
		dataKey, errs := tree.GenerateDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewLocalClient()})
		if len(errs) > 0 {
			t.Fatalf("sops cannot make a data key: %v", errs)
		}
		return dataKey
	})
}

// EncryptForKMS encrypts a YAML document, values under data and
// stringData, for one Cloud KMS key, as `sops encrypt --gcp-kms
// resourceID` does: wrap encrypts the data key with that key (a KMS
// client pointed at kmstest), and sops stores the result base64-encoded.
func EncryptForKMS(t testing.TB, plainYAML, resourceID string, wrap func(dataKey []byte) ([]byte, error)) []byte {
	t.Helper()
	key := &gcpkms.MasterKey{ResourceID: resourceID, CreationDate: time.Now().UTC()}
	doc, _ := encrypt(t, plainYAML, SecretsRegex, sops.KeyGroup{key}, func(*sops.Tree) []byte {
		dataKey := make([]byte, 32)
		if _, err := rand.Read(dataKey); err != nil {
			t.Fatal(err)
		}
		wrapped, err := wrap(dataKey)
		if err != nil {
			t.Fatalf("Cloud KMS cannot encrypt the data key: %v", err)
		}
		key.EncryptedKey = base64.StdEncoding.EncodeToString(wrapped)
		return dataKey
	})
	return doc
}

// encrypt encrypts plainYAML for group with the data key dataKey makes
// (encrypting it for the group's keys).
func encrypt(t testing.TB, plainYAML, encryptedRegex string, group sops.KeyGroup, dataKey func(*sops.Tree) []byte) (doc, key []byte) {
	t.Helper()
	store := &sopsyaml.Store{}
	branches, err := store.LoadPlainFile([]byte(plainYAML))
	if err != nil {
		t.Fatalf("sops cannot load the document: %v", err)
	}
	tree := sops.Tree{
		Branches: branches,
		Metadata: sops.Metadata{
			KeyGroups:      []sops.KeyGroup{group},
			EncryptedRegex: encryptedRegex,
			Version:        sopsVersion,
		},
	}
	if encryptedRegex == "" {
		tree.Metadata.UnencryptedSuffix = sops.DefaultUnencryptedSuffix
	}
	key = dataKey(&tree)
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(key, cipher)
	if err != nil {
		t.Fatal(err)
	}
	tree.Metadata.LastModified = time.Now().UTC()
	tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, key, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil {
		t.Fatal(err)
	}
	doc, err = store.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatal(err)
	}
	return doc, key
}

// Documents of the releases the render and decryption tests make.
const (
	DBSecret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: pay\ntype: Opaque\nstringData:\n  password: hunter2\n  url: postgres://db:5432/pay\n"
	Settings = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: pay\ndata:\n  mode: live\n"
	API      = "# the API\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: pay\nspec:\n  replicas: 2\n"
)

// Doc is one document of a release and the file it came from.
type Doc struct {
	Source string
	Body   string
}

// Stream writes documents the way a stored release holds them.
func Stream(docs ...Doc) []byte {
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString("# Source: " + d.Source + "\n" + d.Body)
	}
	return []byte(b.String())
}
