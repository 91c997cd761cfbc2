// Package pushtest signs ID tokens the way Google signs Pub/Sub push
// tokens, with a key of the test's own whose JWKS is served on loopback:
// tests exercise the production verification path (the bridge's key set,
// fetching a JWKS) without reaching Google.
package pushtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/bucketops/bucketops/webhook"
)

// Issuer is a signing key and the JWKS endpoint that publishes it.
type Issuer struct {
	key     *rsa.PrivateKey
	kid     string
	jwks    *httptest.Server
	fetches atomic.Int64
}

// NewIssuer makes a 2048-bit RSA key and serves its JWKS until the test
// ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	i := &Issuer{key: key, kid: rand.Text()[:12]}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: i.kid, Algorithm: string(jose.RS256), Use: "sig"}}}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	i.jwks = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(i.jwks.Close)
	return i
}

// KeySet is the issuer's keys as the bridge reads Google's: its key set
// on the JWKS URL, fetching again at most once per interval.
func (i *Issuer) KeySet(interval time.Duration) *webhook.KeySet {
	return webhook.NewKeySet(i.jwks.URL, interval)
}

// Fetches counts the requests the JWKS endpoint answered.
func (i *Issuer) Fetches() int64 { return i.fetches.Load() }

// PublicKeyPEM is the signing key's public half, PKIX PEM: what an
// attacker signing HS256 tokens with the public key would use as secret.
func (i *Issuer) PublicKeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&i.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Claims returns the claims of a valid Google push token for audience and
// the service account email, issued now and valid for an hour.
func Claims(audience, email string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss":            "https://accounts.google.com",
		"aud":            audience,
		"azp":            "112233445566778899000",
		"sub":            "112233445566778899000",
		"email":          email,
		"email_verified": true,
		"iat":            now.Unix(),
		"exp":            now.Add(time.Hour).Unix(),
	}
}

// Token signs claims with RS256 under the issuer's key ID.
func (i *Issuer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	return i.sign(t, jose.RS256, i.key, claims)
}

// TokenWithAlg signs claims with another algorithm and key, to test that
// they are refused (HS256 with the public key's bytes, the classic
// confusion attack).
func (i *Issuer) TokenWithAlg(t testing.TB, alg jose.SignatureAlgorithm, key any, claims map[string]any) string {
	t.Helper()
	return i.sign(t, alg, key, claims)
}

func (i *Issuer) sign(t testing.TB, alg jose.SignatureAlgorithm, key any, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", i.kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
