package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// Google's OIDC issuer and the keys it signs ID tokens with.
const (
	googleIssuer   = "https://accounts.google.com"
	googleCertsURL = "https://www.googleapis.com/oauth2/v3/certs"
)

// maxClockSkew is how far in the future a token may say it was issued.
const maxClockSkew = 5 * time.Minute

var (
	// ErrPushUnauthenticated: no token, or one that isn't a valid Google ID
	// token (signature, expiry, issuer). Answered with 401.
	ErrPushUnauthenticated = errors.New("pubsub push: unauthenticated")
	// ErrPushForbidden: a valid Google ID token, but not for us (audience)
	// or not from the push subscription's service account. Answered with
	// 403.
	ErrPushForbidden = errors.New("pubsub push: forbidden")
)

// PushAuth checks the Google-signed OIDC token a Pub/Sub push subscription
// sends with every delivery: its signature, expiry and issuer, that its
// audience is ours, and that it speaks for the subscription's service
// account with a verified email. (Flux's gcr receiver checked only the
// first three: CVE-2026-40109.)
type PushAuth struct {
	// Audience is the push subscription's --push-auth-token-audience.
	Audience string
	// ServiceAccount is the email of its --push-auth-service-account.
	ServiceAccount string
	// Keys verifies signatures: GoogleKeys in production, a KeySet on a
	// test issuer's JWKS in tests.
	Keys oidc.KeySet
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// GoogleKeys returns Google's signing keys, fetched when first needed and
// again when a token names a key not seen yet, at most once per
// keyRefreshInterval.
func GoogleKeys() *KeySet {
	return NewKeySet(googleCertsURL, keyRefreshInterval)
}

// keyRefreshInterval bounds how often a token naming an unknown key makes
// the bridge fetch the key set again. Google publishes a new key well
// before signing with it, so a real token's key is nearly always cached.
const keyRefreshInterval = 30 * time.Second

// KeySet verifies ID token signatures with the keys of a JWKS endpoint,
// cached. go-oidc's remote key set fetches the endpoint again whenever a
// signature fails to verify, so anyone could make the bridge fetch
// Google's keys once per request with a made-up token; this one fetches
// again only for a key ID it doesn't hold, and at most once per interval.
type KeySet struct {
	url      string
	interval time.Duration
	client   *http.Client

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // last fetch attempt, successful or not
}

// NewKeySet reads keys from the JWKS at url, fetching at most once per
// interval.
func NewKeySet(url string, interval time.Duration) *KeySet {
	return &KeySet{url: url, interval: interval, client: &http.Client{Timeout: 10 * time.Second}}
}

// VerifySignature implements oidc.KeySet.
func (k *KeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	// The verifier calling this allows its own algorithms (RS256 for
	// Pub/Sub push, ES256 for IAP); a key verifies only its own.
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return nil, fmt.Errorf("malformed token: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token has one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := k.cached()
	if key, ok := findKey(keys, kid); ok {
		// A known key that doesn't verify the signature: fetching again
		// wouldn't change that.
		return jws.Verify(key)
	}
	keys, err = k.refresh(ctx)
	if err != nil {
		return nil, err
	}
	if key, ok := findKey(keys, kid); ok {
		return jws.Verify(key)
	}
	return nil, fmt.Errorf("no key %q in the issuer's key set", kid)
}

func findKey(keys []jose.JSONWebKey, kid string) (*jose.JSONWebKey, bool) {
	for i := range keys {
		if keys[i].KeyID == kid {
			return &keys[i], true
		}
	}
	return nil, false
}

func (k *KeySet) cached() []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys
}

// refresh fetches the key set, unless the last attempt was less than an
// interval ago; either way it returns the keys held.
func (k *KeySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.fetched.IsZero() && time.Since(k.fetched) < k.interval {
		return k.keys, nil
	}
	k.fetched = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return k.keys, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return k.keys, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return k.keys, fmt.Errorf("fetching the issuer's keys: %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return k.keys, fmt.Errorf("the issuer's key set: %w", err)
	}
	k.keys = set.Keys
	return k.keys, nil
}

// Validate reports what is missing.
func (a *PushAuth) Validate() error {
	var errs []error
	if a.Audience == "" {
		errs = append(errs, errors.New("pubsub push: no audience; give --pubsub-audience, the push subscription's token audience"))
	}
	if a.ServiceAccount == "" {
		errs = append(errs, errors.New("pubsub push: no service account; give --pubsub-service-account, the email the subscription authenticates as"))
	}
	if a.Keys == nil {
		errs = append(errs, errors.New("pubsub push: no key set"))
	}
	return errors.Join(errs...)
}

// pushDenied is a refusal whose message, answered to whoever sent the
// token, doesn't name the bridge's configuration; Detail does, for the log.
type pushDenied struct {
	public error
	detail string
}

func (e *pushDenied) Error() string { return e.public.Error() }
func (e *pushDenied) Unwrap() error { return e.public }

// Detail explains the refusal with the configuration it was checked
// against: for the bridge's log only.
func (e *pushDenied) Detail() string { return e.detail }

// PushIdentity is who sent a push delivery.
type PushIdentity struct {
	Email   string
	Subject string
}

// pushClaims are the claims of Google's ID token we check beyond the
// standard ones. email_verified must be the JSON boolean true, which is
// what Google sends; a string "true" is refused.
type pushClaims struct {
	Email         string `json:"email"`
	EmailVerified any    `json:"email_verified"`
}

// Verify checks the request's bearer token. Errors wrap
// ErrPushUnauthenticated or ErrPushForbidden and never contain the token.
func (a *PushAuth) Verify(r *http.Request) (PushIdentity, error) {
	scheme, raw, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	raw = strings.TrimSpace(raw)
	if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
		return PushIdentity{}, fmt.Errorf("%w: no bearer token; configure the push subscription with --push-auth-service-account", ErrPushUnauthenticated)
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	verifier := oidc.NewVerifier(googleIssuer, a.Keys, &oidc.Config{
		// The audience is checked below, to answer 403 with what differs.
		SkipClientIDCheck:    true,
		SupportedSigningAlgs: []string{oidc.RS256},
		Now:                  now,
	})
	tok, err := verifier.Verify(r.Context(), raw)
	if err != nil {
		// go-oidc's messages name the issuer, the expiry or the signature
		// problem, never the token.
		return PushIdentity{}, fmt.Errorf("%w: not a valid Google ID token: %v", ErrPushUnauthenticated, err)
	}
	if tok.IssuedAt.After(now().Add(maxClockSkew)) {
		return PushIdentity{}, fmt.Errorf("%w: token issued in the future (%s)", ErrPushUnauthenticated, tok.IssuedAt.UTC().Format(time.RFC3339))
	}
	if len(tok.Audience) != 1 || tok.Audience[0] != a.Audience {
		return PushIdentity{}, &pushDenied{public: fmt.Errorf("%w: the token's audience is not this bridge's", ErrPushForbidden),
			detail: fmt.Sprintf("token audience %q is not the configured --pubsub-audience %q", tok.Audience, a.Audience)}
	}
	var c pushClaims
	if err := tok.Claims(&c); err != nil {
		return PushIdentity{}, fmt.Errorf("%w: unreadable claims: %v", ErrPushUnauthenticated, err)
	}
	// Google's emails are lowercase; an exact match is what a service
	// account is.
	if c.Email != a.ServiceAccount {
		return PushIdentity{}, &pushDenied{public: fmt.Errorf("%w: the token's email is not the push subscription's service account", ErrPushForbidden),
			detail: fmt.Sprintf("token email %q is not the configured --pubsub-service-account %q", c.Email, a.ServiceAccount)}
	}
	if verified, ok := c.EmailVerified.(bool); !ok || !verified {
		return PushIdentity{}, fmt.Errorf("%w: token email %q is not verified (email_verified is %v, want true)", ErrPushForbidden, c.Email, c.EmailVerified)
	}
	return PushIdentity{Email: c.Email, Subject: tok.Subject}, nil
}
