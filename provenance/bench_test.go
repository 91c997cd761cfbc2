package provenance_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strconv"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// BenchmarkPublish compares an uncontended publish with and without a
// file key: what signing adds inside the publish loop (building the
// statement, Ed25519, the envelope, 1 KiB more metadata on the wire).
func BenchmarkPublish(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := provenance.NewKeySigner(priv)
	for _, signed := range []bool{false, true} {
		b.Run(fmt.Sprintf("signed=%t", signed), func(b *testing.B) {
			s := storetest.New(b, true).Store(b, "")
			app := "prod/payments"
			for i := range b.N {
				p := store.Publication{Data: manifest(app, i), Sequence: uint64(i + 1), Author: "ci@example.com", Source: "github.com/acme/payments@" + strconv.Itoa(i), Resources: 1}
				if signed {
					p.Sign = provenance.Sign(signer)
				}
				if _, err := s.Publish(b.Context(), app, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSign is signing alone, without I/O: the statement, its
// signature and the envelope of one release.
func BenchmarkSign(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	sign := provenance.Sign(provenance.NewKeySigner(priv))
	att := store.Attestation{App: "prod/payments", Digest: store.Digest([]byte("x")), Sequence: 42, Kind: store.KindRelease,
		Author: "ci@example.com", Source: "github.com/acme/payments@9f1c", Previous: store.Ref{App: "prod/payments", Generation: 1733150000123456}, PreviousDigest: store.Digest(nil)}
	for b.Loop() {
		if _, err := sign(b.Context(), att); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyChain walks a signed history of 10,000 releases, built
// directly in the emulator as a chain of valid signatures, reading every
// release's bytes or only the listing.
func BenchmarkVerifyChain(b *testing.B) {
	const n = 10_000
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := provenance.NewKeySigner(priv)
	keys := provenance.NewKeys(provenance.Key{Name: "ci", Public: signer.Public()})
	tb := storetest.New(b, true)
	s := tb.Store(b, "")
	app := "prod/payments"
	sign := provenance.Sign(signer)
	prev, prevDigest := int64(0), ""
	for g := int64(1); g <= n; g++ {
		data := manifest(app, int(g))
		att := store.Attestation{App: app, Digest: store.Digest(data), Sequence: uint64(g), Kind: store.KindRelease, Author: "ci",
			Previous: store.Ref{App: app, Generation: prev}, PreviousDigest: prevDigest}
		sig, err := sign(context.Background(), att)
		if err != nil {
			b.Fatal(err)
		}
		tb.Server.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{
				BucketName: storetest.BucketName, Name: app + "/manifests.yaml", Generation: g, ContentType: store.ContentType,
				Metadata: map[string]string{"bucketops-digest": att.Digest, "bucketops-sequence": strconv.Itoa(int(g)),
					"bucketops-kind": store.KindRelease, "bucketops-author": "ci", "bucketops-signature": sig},
			},
			Content: data,
		})
		prev, prevDigest = g, att.Digest
	}
	for _, skip := range []bool{false, true} {
		b.Run(fmt.Sprintf("releases=%d/skip-bytes=%t", n, skip), func(b *testing.B) {
			for b.Loop() {
				findings, err := keys.VerifyChain(b.Context(), s, app, provenance.ChainOptions{SkipBytes: skip})
				if err != nil {
					b.Fatal(err)
				}
				for _, f := range findings {
					if !f.OK() {
						b.Fatal(f.Error())
					}
				}
				if len(findings) != n {
					b.Fatalf("%d findings", len(findings))
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "releases/s")
		})
	}
}
