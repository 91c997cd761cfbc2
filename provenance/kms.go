package provenance

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
	"sync"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// KMSScheme prefixes a Cloud KMS key version where a key file could be
// given.
const KMSScheme = "gcpkms://"

var kmsVersionRE = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+/cryptoKeyVersions/[0-9]+$`)

// kmsTimeout bounds one call to Cloud KMS.
const kmsTimeout = 30 * time.Second

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// KMSVersion returns the key version resource name of a gcpkms:// key, or
// an error saying what a key version looks like.
func KMSVersion(spec string) (string, error) {
	name, ok := strings.CutPrefix(spec, KMSScheme)
	if !ok || !kmsVersionRE.MatchString(name) {
		return "", fmt.Errorf("Cloud KMS key %q: want gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N (a key version, not a key)", spec)
	}
	return name, nil
}

// KMS reaches Cloud KMS, dialling on first use with the options given
// (none in production: Application Default Credentials).
type KMS struct {
	Options []option.ClientOption

	mu     sync.Mutex
	client *kms.KeyManagementClient
}

func (k *KMS) get(ctx context.Context) (*kms.KeyManagementClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client == nil {
		c, err := kms.NewKeyManagementClient(context.WithoutCancel(ctx), k.Options...)
		if err != nil {
			return nil, fmt.Errorf("Cloud KMS: %w", err)
		}
		k.client = c
	}
	return k.client, nil
}

// Close closes the client, if one was dialled.
func (k *KMS) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client == nil {
		return nil
	}
	return k.client.Close()
}

// PublicKey fetches an EC_SIGN_ED25519 key version's public key, which
// takes roles/cloudkms.publicKeyViewer (or signerVerifier) on the key.
func (k *KMS) PublicKey(ctx context.Context, version string) (ed25519.PublicKey, error) {
	c, err := k.get(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, kmsTimeout)
	defer cancel()
	pk, err := c.GetPublicKey(ctx, &kmspb.GetPublicKeyRequest{Name: version})
	if err != nil {
		return nil, fmt.Errorf("Cloud KMS key %s: %w", version, err)
	}
	if pk.GetAlgorithm() != kmspb.CryptoKeyVersion_EC_SIGN_ED25519 {
		return nil, fmt.Errorf("Cloud KMS key %s is %s; releases are signed with EC_SIGN_ED25519", version, pk.GetAlgorithm())
	}
	if sum := pk.GetPemCrc32C(); sum != nil && int64(crc32.Checksum([]byte(pk.GetPem()), castagnoli)) != sum.GetValue() {
		return nil, fmt.Errorf("Cloud KMS key %s: the public key was corrupted in transit", version)
	}
	pub, err := ParsePublicKey([]byte(pk.GetPem()))
	if err != nil {
		return nil, fmt.Errorf("Cloud KMS key %s: %w", version, err)
	}
	return pub, nil
}

// Signer returns a signer whose private key never leaves Cloud KMS; CI
// needs roles/cloudkms.signerVerifier on that key and nothing else.
func (k *KMS) Signer(ctx context.Context, version string) (Signer, error) {
	pub, err := k.PublicKey(ctx, version)
	if err != nil {
		return nil, err
	}
	return &kmsSigner{kms: k, name: version, pub: pub, id: KeyID(pub)}, nil
}

type kmsSigner struct {
	kms  *KMS
	name string
	pub  ed25519.PublicKey
	id   string
}

// Sign has Cloud KMS sign data (Ed25519 signs the message itself, not a
// digest), checking both directions for corruption in transit and the
// signature against the public key before it is stored.
func (s *kmsSigner) Sign(ctx context.Context, data []byte) ([]byte, error) {
	c, err := s.kms.get(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, kmsTimeout)
	defer cancel()
	resp, err := c.AsymmetricSign(ctx, &kmspb.AsymmetricSignRequest{
		Name:       s.name,
		Data:       data,
		DataCrc32C: wrapperspb.Int64(int64(crc32.Checksum(data, castagnoli))),
	})
	if err != nil {
		return nil, fmt.Errorf("Cloud KMS key %s: %w", s.name, err)
	}
	switch {
	case !resp.GetVerifiedDataCrc32C():
		return nil, fmt.Errorf("Cloud KMS key %s: the request was corrupted in transit", s.name)
	case resp.GetName() != s.name:
		return nil, fmt.Errorf("Cloud KMS signed with %s, not %s", resp.GetName(), s.name)
	case resp.GetSignatureCrc32C() == nil || int64(crc32.Checksum(resp.GetSignature(), castagnoli)) != resp.GetSignatureCrc32C().GetValue():
		return nil, fmt.Errorf("Cloud KMS key %s: the signature was corrupted in transit", s.name)
	case !ed25519.Verify(s.pub, data, resp.GetSignature()):
		return nil, fmt.Errorf("Cloud KMS key %s: the signature does not verify with the key's public key", s.name)
	}
	return resp.GetSignature(), nil
}

func (s *kmsSigner) KeyID() (string, error)    { return s.id, nil }
func (s *kmsSigner) Public() ed25519.PublicKey { return s.pub }

// LoadSigner opens the signing key spec names: a key file, or a Cloud KMS
// key version (gcpkms://…) reached through k.
func LoadSigner(ctx context.Context, spec string, k *KMS) (Signer, error) {
	if strings.HasPrefix(spec, KMSScheme) {
		name, err := KMSVersion(spec)
		if err != nil {
			return nil, err
		}
		return k.Signer(ctx, name)
	}
	return LoadKeyFile(spec)
}
