// Package kmstest runs Cloud KMS in process for tests: a gRPC server built
// from kmspb.KeyManagementServiceServer that holds Ed25519 key versions
// and symmetric keys, and answers GetPublicKey, AsymmetricSign, Encrypt
// and Decrypt as Cloud KMS does (PEM public keys, CRC32C integrity fields,
// ciphertext bound to the key that made it, NotFound and
// PermissionDenied), so tests reach it through the real KMS client. Every
// other method is Unimplemented.
package kmstest

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"hash/crc32"
	"net"
	"sync"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Server is an in-process Cloud KMS.
type Server struct {
	kmspb.UnimplementedKeyManagementServiceServer
	// Addr is host:port of the gRPC listener on 127.0.0.1.
	Addr string

	mu        sync.Mutex
	keys      map[string]ed25519.PrivateKey
	symmetric map[string]cipher.AEAD
	denied    map[string]bool
	signs     int
	decrypts  int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: lis.Addr().String(), keys: map[string]ed25519.PrivateKey{}, symmetric: map[string]cipher.AEAD{}, denied: map[string]bool{}}
	g := grpc.NewServer()
	kmspb.RegisterKeyManagementServiceServer(g, s)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return s
}

// ClientOptions reach the server with the real client, without
// credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// AddKey creates an EC_SIGN_ED25519 key version named name
// (projects/…/cryptoKeyVersions/N) and returns its public key.
func (s *Server) AddKey(name string) ed25519.PublicKey {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[name] = priv
	return pub
}

// Deny makes every call on name fail with PermissionDenied, as Cloud KMS
// answers a caller without a role on the key.
func (s *Server) Deny(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[name] = true
}

// Signs counts the AsymmetricSign calls answered.
func (s *Server) Signs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signs
}

func (s *Server) key(name, permission string) (ed25519.PrivateKey, error) {
	return lookup(s, s.keys, name, permission, "CryptoKeyVersion")
}

// lookup finds name among keys as Cloud KMS does for a caller: refused
// if denied, else not found if absent.
func lookup[K any](s *Server, keys map[string]K, name, permission, kind string) (K, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var none K
	if s.denied[name] {
		return none, status.Errorf(codes.PermissionDenied, "Permission '%s' denied on resource '%s' (or it may not exist).", permission, name)
	}
	k, ok := keys[name]
	if !ok {
		return none, status.Errorf(codes.NotFound, "%s %s not found.", kind, name)
	}
	return k, nil
}

// GetPublicKey answers the key's PKIX PEM.
func (s *Server) GetPublicKey(_ context.Context, req *kmspb.GetPublicKeyRequest) (*kmspb.PublicKey, error) {
	k, err := s.key(req.GetName(), "cloudkms.cryptoKeyVersions.viewPublicKey")
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	p := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return &kmspb.PublicKey{
		Name:            req.GetName(),
		Pem:             p,
		PemCrc32C:       wrapperspb.Int64(int64(crc32.Checksum([]byte(p), castagnoli))),
		Algorithm:       kmspb.CryptoKeyVersion_EC_SIGN_ED25519,
		ProtectionLevel: kmspb.ProtectionLevel_HSM,
	}, nil
}

// AsymmetricSign signs the request's data (Ed25519 takes data, never a
// digest).
func (s *Server) AsymmetricSign(_ context.Context, req *kmspb.AsymmetricSignRequest) (*kmspb.AsymmetricSignResponse, error) {
	k, err := s.key(req.GetName(), "cloudkms.cryptoKeyVersions.useToSign")
	if err != nil {
		return nil, err
	}
	if req.GetDigest() != nil || len(req.GetData()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "EC_SIGN_ED25519 keys sign data, not a digest")
	}
	verified := false
	if sum := req.GetDataCrc32C(); sum != nil {
		if int64(crc32.Checksum(req.GetData(), castagnoli)) != sum.GetValue() {
			return nil, status.Error(codes.InvalidArgument, "The checksum in field data_crc32c did not match the data in field data.")
		}
		verified = true
	}
	sig := ed25519.Sign(k, req.GetData())
	s.mu.Lock()
	s.signs++
	s.mu.Unlock()
	return &kmspb.AsymmetricSignResponse{
		Name:               req.GetName(),
		Signature:          sig,
		SignatureCrc32C:    wrapperspb.Int64(int64(crc32.Checksum(sig, castagnoli))),
		VerifiedDataCrc32C: verified,
		ProtectionLevel:    kmspb.ProtectionLevel_HSM,
	}, nil
}

// AddSymmetricKey creates a GOOGLE_SYMMETRIC_ENCRYPTION key named name
// (projects/…/cryptoKeys/K) with a random AES-256 key of its own.
func (s *Server) AddSymmetricKey(name string) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.symmetric[name] = aead
}

// Decrypts counts the Decrypt calls answered, successful or not.
func (s *Server) Decrypts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decrypts
}

func (s *Server) symmetricKey(name, permission string) (cipher.AEAD, error) {
	return lookup(s, s.symmetric, name, permission, "CryptoKey")
}

// Encrypt seals the plaintext with the key: nonce, then AES-GCM. As with
// Cloud KMS, only that key decrypts it.
func (s *Server) Encrypt(_ context.Context, req *kmspb.EncryptRequest) (*kmspb.EncryptResponse, error) {
	k, err := s.symmetricKey(req.GetName(), "cloudkms.cryptoKeyVersions.useToEncrypt")
	if err != nil {
		return nil, err
	}
	verified := false
	if sum := req.GetPlaintextCrc32C(); sum != nil {
		if int64(crc32.Checksum(req.GetPlaintext(), castagnoli)) != sum.GetValue() {
			return nil, status.Error(codes.InvalidArgument, "The checksum in field plaintext_crc32c did not match the data in field plaintext.")
		}
		verified = true
	}
	nonce := make([]byte, k.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	ct := k.Seal(nonce, nonce, req.GetPlaintext(), nil)
	return &kmspb.EncryptResponse{
		Name:                    req.GetName(),
		Ciphertext:              ct,
		CiphertextCrc32C:        wrapperspb.Int64(int64(crc32.Checksum(ct, castagnoli))),
		VerifiedPlaintextCrc32C: verified,
		ProtectionLevel:         kmspb.ProtectionLevel_SOFTWARE,
	}, nil
}

// Decrypt opens ciphertext made by Encrypt with the same key; ciphertext
// of another key is refused as Cloud KMS refuses it.
func (s *Server) Decrypt(_ context.Context, req *kmspb.DecryptRequest) (*kmspb.DecryptResponse, error) {
	s.mu.Lock()
	s.decrypts++
	s.mu.Unlock()
	k, err := s.symmetricKey(req.GetName(), "cloudkms.cryptoKeyVersions.useToDecrypt")
	if err != nil {
		return nil, err
	}
	ct := req.GetCiphertext()
	var plain []byte
	if len(ct) >= k.NonceSize() {
		plain, err = k.Open(nil, ct[:k.NonceSize()], ct[k.NonceSize():], nil)
	}
	if len(ct) < k.NonceSize() || err != nil {
		return nil, status.Error(codes.InvalidArgument, "Decryption failed: verify that 'name' refers to the correct CryptoKey.")
	}
	return &kmspb.DecryptResponse{
		Plaintext:       plain,
		PlaintextCrc32C: wrapperspb.Int64(int64(crc32.Checksum(plain, castagnoli))),
		ProtectionLevel: kmspb.ProtectionLevel_SOFTWARE,
	}, nil
}
