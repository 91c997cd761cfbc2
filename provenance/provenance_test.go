package provenance_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/provenance/kmstest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

func manifest(app string, n int) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  n: %q\n", strings.ReplaceAll(app, "/", "-"), fmt.Sprint(n))
}

// keyFiles runs what bucketops keygen does and returns the two files.
func keyFiles(t *testing.T) (private, public string) {
	t.Helper()
	priv, pub, err := provenance.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	private, public = filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub")
	if err := os.WriteFile(private, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return private, public
}

func trusted(t *testing.T, name, pubFile string) provenance.Keys {
	t.Helper()
	data, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := provenance.ParsePublicKey(data)
	if err != nil {
		t.Fatal(err)
	}
	return provenance.NewKeys(provenance.Key{Name: name, Public: pub})
}

func publish(t *testing.T, s *store.Store, signer provenance.Signer, app string, n int) store.Release {
	t.Helper()
	p := store.Publication{Data: manifest(app, n), Sequence: uint64(n), Author: "ci@example.com", Message: fmt.Sprintf("build %d", n), Source: fmt.Sprintf("https://git.example.com/c/%d", n), Resources: 1, Labels: map[string]string{"team": "x"}}
	if signer != nil {
		p.Sign = provenance.Sign(signer)
	}
	res, err := s.Publish(t.Context(), app, p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Release
}

// verifyChain fails the test unless every release of app verifies.
func verifyChain(t *testing.T, keys provenance.Keys, s *store.Store, app string, want int) []provenance.Finding {
	t.Helper()
	findings, err := keys.VerifyChain(t.Context(), s, app, provenance.ChainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != want {
		t.Fatalf("%s: %d findings, want %d", app, len(findings), want)
	}
	for _, f := range findings {
		if !f.OK() {
			t.Errorf("%s", f.Error())
		}
	}
	return findings
}

func TestFileKeyRoundTrip(t *testing.T) {
	s := storetest.New(t, true).Store(t, "")
	privFile, pubFile := keyFiles(t)
	signer, err := provenance.LoadKeyFile(privFile)
	if err != nil {
		t.Fatal(err)
	}
	keys := trusted(t, "ci", pubFile)
	for n := 1; n <= 3; n++ {
		publish(t, s, signer, "staging/web", n)
	}
	// promote, rollback and retire are releases of their own, signed too.
	prod, err := s.Copy(t.Context(), store.Ref{App: "staging/web"}, "prod/web", store.Publication{Sequence: 3, Author: "release-bot", Sign: provenance.Sign(signer)})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.History(t.Context(), "staging/web", store.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Copy(t.Context(), first[2].Ref(), "staging/web", store.Publication{Sequence: 4, Message: "roll back", Sign: provenance.Sign(signer)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retire(t.Context(), "staging/web", store.Publication{Sequence: 5, Sign: provenance.Sign(signer)}); err != nil {
		t.Fatal(err)
	}
	findings := verifyChain(t, keys, s, "staging/web", 5)
	if f := findings[0]; f.Key != "ci" || f.KeyID != provenance.KeyID(signer.Public()) || !strings.HasPrefix(f.KeyID, "SHA256:") {
		t.Errorf("finding names key %q (%s), want ci (%s)", f.Key, f.KeyID, provenance.KeyID(signer.Public()))
	}
	verifyChain(t, keys, s, "prod/web", 1)
	f, err := keys.VerifyRef(t.Context(), s, prod.Ref())
	if err != nil || !f.OK() {
		t.Errorf("verify %s: %v %v", prod.Ref(), f, err)
	}
	// The same releases against a key nobody configured are refused.
	_, otherPub := keyFiles(t)
	f, err = trusted(t, "other", otherPub).VerifyRef(t.Context(), s, prod.Ref())
	if err != nil || f.Problem != provenance.UnknownKey || !strings.Contains(f.Detail, provenance.KeyID(signer.Public())) {
		t.Errorf("verify against another key: %+v %v, want unknown_key naming the signer's key id", f, err)
	}
}

func TestKMSRoundTrip(t *testing.T) {
	s := storetest.New(t, true).Store(t, "")
	fake := kmstest.Start(t)
	const version = "projects/p/locations/europe-west1/keyRings/ci/cryptoKeys/releases/cryptoKeyVersions/1"
	pub := fake.AddKey(version)
	k := &provenance.KMS{Options: fake.ClientOptions()}
	t.Cleanup(func() { k.Close() })
	signer, err := provenance.LoadSigner(t.Context(), provenance.KMSScheme+version, k)
	if err != nil {
		t.Fatal(err)
	}
	if !signer.Public().Equal(pub) {
		t.Fatal("the KMS signer's public key is not the key version's")
	}
	for n := 1; n <= 2; n++ {
		publish(t, s, signer, "prod/api", n)
	}
	if fake.Signs() != 2 {
		t.Errorf("KMS signed %d times for 2 publishes", fake.Signs())
	}
	verifyChain(t, provenance.NewKeys(provenance.Key{Name: "kms", Public: pub}), s, "prod/api", 2)

	// What a misconfigured CI sees.
	fake.Deny(version)
	_, err = provenance.LoadSigner(t.Context(), provenance.KMSScheme+version, k)
	if err == nil || !strings.Contains(err.Error(), "PermissionDenied") || !strings.Contains(err.Error(), version) {
		t.Errorf("denied key: %v, want PermissionDenied naming the key", err)
	}
	_, err = provenance.LoadSigner(t.Context(), "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k", k)
	if err == nil || !strings.Contains(err.Error(), "cryptoKeyVersions/N") {
		t.Errorf("a key without its version: %v, want an error showing a key version", err)
	}
}

// TestEnvelopeInterop checks an envelope with go-securesystemslib's own
// verifier, and its statement against the in-toto shape, independently of
// the package's reader.
func TestEnvelopeInterop(t *testing.T) {
	s := storetest.New(t, true).Store(t, "")
	pub, priv, _ := ed25519.GenerateKey(nil)
	publish(t, s, provenance.NewKeySigner(priv), "a/b", 1)
	rel := publish(t, s, provenance.NewKeySigner(priv), "a/b", 2)
	var env dsse.Envelope
	if err := json.Unmarshal([]byte(rel.Signature), &env); err != nil {
		t.Fatal(err)
	}
	ev, err := dsse.NewEnvelopeVerifier(edVerifier{pub})
	if err != nil {
		t.Fatal(err)
	}
	_, payload, err := ev.VerifyAndDecode(t.Context(), &env)
	if err != nil {
		t.Fatalf("dsse's verifier refuses the envelope: %v", err)
	}
	if env.PayloadType != "application/vnd.in-toto+json" {
		t.Errorf("payload type %q", env.PayloadType)
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate map[string]any `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	head, _ := s.History(t.Context(), "a/b", store.HistoryOptions{})
	prev := head[1]
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != provenance.PredicateType ||
		len(st.Subject) != 1 || st.Subject[0].Name != "a/b" || "sha256:"+st.Subject[0].Digest["sha256"] != rel.Digest {
		t.Errorf("statement %s", payload)
	}
	want := map[string]any{"generation": fmt.Sprint(prev.Generation), "digest": prev.Digest}
	if got := st.Predicate["previous"]; fmt.Sprint(got) != fmt.Sprint(want) || st.Predicate["sequence"] != "2" || st.Predicate["author"] != "ci@example.com" {
		t.Errorf("predicate %v, want previous %v, sequence 2", st.Predicate, want)
	}
	// The DSSE spec's test vector for the pre-authentication encoding.
	if got := string(dsse.PAE("http://example.com/HelloWorld", []byte("hello world"))); got != "DSSEv1 29 http://example.com/HelloWorld 11 hello world" {
		t.Errorf("PAE = %q", got)
	}
}

type edVerifier struct{ pub ed25519.PublicKey }

func (v edVerifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("bad signature")
	}
	return nil
}
func (v edVerifier) KeyID() (string, error)   { return provenance.KeyID(v.pub), nil }
func (v edVerifier) Public() crypto.PublicKey { return v.pub }

// TestTampering does to a signed history what anyone with write access to
// the bucket can, and checks each is caught, by the chain walk and by the
// single-release check the bridge makes, with its own problem.
func TestTampering(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, b *storetest.Bucket, hist []store.Release)
		problem string
		detail  string
	}{
		{"bytes rewritten, metadata kept", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			b.Rewrite(t, "app/x/manifests.yaml", manifest("app/x", 99))
		}, provenance.DigestMismatch, "not the ones signed"},
		{"bytes rewritten with their digest in the metadata", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			b.Rewrite(t, "app/x/manifests.yaml", manifest("app/x", 99))
			b.EditMetadata(t, "app/x/manifests.yaml", "bucketops-digest", store.Digest(manifest("app/x", 99)))
		}, provenance.MetadataMismatch, "digest"},
		{"author edited", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			b.EditMetadata(t, "app/x/manifests.yaml", "bucketops-author", "mallory")
		}, provenance.MetadataMismatch, `author "mallory"`},
		{"labels edited to route the app elsewhere", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			b.EditMetadata(t, "app/x/manifests.yaml", "bucketops-labels", "cluster=attacker")
		}, provenance.MetadataMismatch, `labels "cluster=attacker"`},
		{"signature altered", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			var env dsse.Envelope
			json.Unmarshal([]byte(b.Attrs(t, "app/x/manifests.yaml", 0).Metadata["bucketops-signature"]), &env)
			sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
			sig[0] ^= 1
			env.Signatures[0].Sig = base64.StdEncoding.EncodeToString(sig)
			out, _ := json.Marshal(env)
			b.EditMetadata(t, "app/x/manifests.yaml", "bucketops-signature", string(out))
		}, provenance.BadSignature, "does not verify"},
		{"signed by an untrusted key", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			_, priv, _ := ed25519.GenerateKey(nil)
			publish(t, b.Store(t, ""), provenance.NewKeySigner(priv), "app/x", 4)
		}, provenance.UnknownKey, "not a trusted key"},
		{"unsigned release", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			publish(t, b.Store(t, ""), nil, "app/x", 4)
		}, provenance.MissingSignature, "not signed"},
		{"middle generation deleted", func(t *testing.T, b *storetest.Bucket, hist []store.Release) {
			b.DeleteGeneration(t, "app/x/manifests.yaml", hist[1].Generation)
		}, provenance.Gap, "gone from the history"},
		{"old release replayed as a new generation", func(t *testing.T, b *storetest.Bucket, hist []store.Release) {
			b.CopyObject(t, "app/x/manifests.yaml", hist[1].Generation, "app/x/manifests.yaml")
		}, provenance.Replay, "replayed"},
		{"statement copied from another app", func(t *testing.T, b *storetest.Bucket, _ []store.Release) {
			b.CopyObject(t, "app/y/manifests.yaml", 0, "app/x/manifests.yaml")
		}, provenance.WrongApp, "signed for app/y"},
	}
	details := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := storetest.New(t, true)
			s := b.Store(t, "")
			_, priv, _ := ed25519.GenerateKey(nil)
			signer := provenance.NewKeySigner(priv)
			keys := provenance.NewKeys(provenance.Key{Name: "ci", Public: signer.Public()})
			var hist []store.Release
			for n := 1; n <= 3; n++ {
				hist = append(hist, publish(t, s, signer, "app/x", n))
			}
			publish(t, s, signer, "app/y", 7)
			verifyChain(t, keys, s, "app/x", 3)

			tc.tamper(t, b, hist)

			findings, err := keys.VerifyChain(t.Context(), s, "app/x", provenance.ChainOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var bad []provenance.Finding
			for _, f := range findings {
				if !f.OK() {
					bad = append(bad, f)
				}
			}
			if len(bad) != 1 || bad[0].Problem != tc.problem || !strings.Contains(bad[0].Detail, tc.detail) {
				t.Fatalf("chain: %v, want one %s saying %q", bad, tc.problem, tc.detail)
			}
			if prev, dup := details[bad[0].Detail]; dup {
				t.Errorf("%q gives the same message as %q", tc.name, prev)
			}
			details[bad[0].Detail] = tc.name

			// The bridge's check: the head alone, with its predecessor.
			head, _, err := s.Read(t.Context(), store.Ref{App: "app/x"})
			if errors.Is(err, store.ErrCorrupt) {
				return // the bridge refuses it before verifying anything
			}
			if err != nil {
				t.Fatal(err)
			}
			f, err := keys.Verify(t.Context(), s, head)
			if err != nil {
				t.Fatal(err)
			}
			if f.OK() {
				t.Fatalf("the head verifies alone after %s", tc.name)
			}
		})
	}
}

// TestConcurrentSignedPublishes races 32 signing writers on one app: each
// signature names the head its write replaced, and the generation
// precondition refuses a write whose head moved, so every release verifies
// and the chain has no fork.
func TestConcurrentSignedPublishes(t *testing.T) {
	s := storetest.New(t, true).Store(t, "")
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := provenance.NewKeySigner(priv)
	const writers = 32
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			// No sequence: every writer's release lands, in whatever order.
			_, err := s.Publish(context.WithoutCancel(t.Context()), "prod/busy", store.Publication{Data: manifest("prod/busy", w), Author: fmt.Sprint("writer-", w), Sign: provenance.Sign(signer)})
			if err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		})
	}
	wg.Wait()
	verifyChain(t, provenance.NewKeys(provenance.Key{Name: "ci", Public: signer.Public()}), s, "prod/busy", writers)
}

// TestSignedMetadataFitsGCS: the statement repeats the author, message and
// source, so signing halves what they may hold; past GCS's 8 KiB the
// publish is refused before anything is written.
func TestSignedMetadataFitsGCS(t *testing.T) {
	s := storetest.New(t, true).Store(t, "")
	_, priv, _ := ed25519.GenerateKey(nil)
	p := store.Publication{Data: manifest("a/b", 1), Author: strings.Repeat("a", 100), Source: strings.Repeat("s", 200),
		Message: strings.Repeat("m", provenance.MaxSignedText-300), Sign: provenance.Sign(provenance.NewKeySigner(priv))}
	if _, err := s.Publish(t.Context(), "a/b", p); err != nil {
		t.Fatalf("author, source and message of %d bytes in all: %v", provenance.MaxSignedText, err)
	}
	p.Data, p.Message = manifest("a/b", 2), strings.Repeat("m", 3*provenance.MaxSignedText)
	_, err := s.Publish(t.Context(), "a/b", p)
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "8192") {
		t.Fatalf("a long message: %v, want ErrTooLarge naming the limit", err)
	}
	if hist, _ := s.History(t.Context(), "a/b", store.HistoryOptions{}); len(hist) != 1 {
		t.Errorf("%d releases after a refused publish, want 1", len(hist))
	}
}
