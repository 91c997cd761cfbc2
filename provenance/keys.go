package provenance

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/bucketops/bucketops/store"
)

// Signer signs statements with an Ed25519 key it may not hold (Cloud
// KMS): a DSSE signer that knows its public key.
type Signer interface {
	dsse.Signer
	// Public is the key that verifies the signatures.
	Public() ed25519.PublicKey
}

// KeyID names a public key the way envelopes do: the SHA-256 fingerprint
// OpenSSH prints for it (SHA256:…), so `ssh-keygen -lf` on the key agrees.
func KeyID(pub ed25519.PublicKey) string {
	id, err := dsse.SHA256KeyID(pub)
	if err != nil {
		// ssh accepts every 32-byte Ed25519 key; a shorter one is a bug.
		panic(fmt.Sprintf("provenance: key id of a %d-byte Ed25519 key: %v", len(pub), err))
	}
	return id
}

// GenerateKey returns a new Ed25519 key pair: the private key as PKCS#8
// PEM, the public key as PKIX PEM.
func GenerateKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	public, err = MarshalPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), public, nil
}

// MarshalPublicKey encodes pub as PKIX PEM, the form trust policies and
// verify --key take.
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// keySigner signs with an Ed25519 private key in memory.
type keySigner struct {
	priv ed25519.PrivateKey
	id   string
}

// NewKeySigner signs with priv.
func NewKeySigner(priv ed25519.PrivateKey) Signer {
	return &keySigner{priv: priv, id: KeyID(priv.Public().(ed25519.PublicKey))}
}

func (s *keySigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.priv, data), nil
}
func (s *keySigner) KeyID() (string, error)    { return s.id, nil }
func (s *keySigner) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// ParsePrivateKey reads an Ed25519 private key from PKCS#8 PEM, what
// bucketops keygen and `openssl genpkey -algorithm ed25519` write.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\" (PKCS#8); make one with bucketops keygen")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PKCS#8: %w", err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, but releases are signed with Ed25519; make a key with bucketops keygen", key)
	}
	return priv, nil
}

// ParsePublicKey reads an Ed25519 public key from PKIX PEM, what bucketops
// keygen writes and `gcloud kms keys versions get-public-key` prints.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		if block != nil && strings.Contains(block.Type, "PRIVATE") {
			return nil, errors.New("this is a private key: give the public key (the .pub file bucketops keygen wrote)")
		}
		return nil, errors.New("not a PEM \"PUBLIC KEY\" (PKIX)")
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PKIX: %w", err)
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, but releases are signed with Ed25519", key)
	}
	return pub, nil
}

// LoadKeyFile reads a private key file for signing.
func LoadKeyFile(name string) (Signer, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	priv, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", name, err)
	}
	return NewKeySigner(priv), nil
}

// Sign returns a store.Publication.Sign that signs each attempt's
// statement with s and returns the envelope as compact JSON.
func Sign(s Signer) func(context.Context, store.Attestation) (string, error) {
	es, err := dsse.NewEnvelopeSigner(s)
	return func(ctx context.Context, a store.Attestation) (string, error) {
		if err != nil {
			return "", err
		}
		payload, err := statement(a)
		if err != nil {
			return "", fmt.Errorf("statement: %w", err)
		}
		env, err := es.SignPayload(ctx, PayloadType, payload)
		if err != nil {
			return "", err
		}
		out, err := json.Marshal(env)
		return string(out), err
	}
}
