package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
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
	// Keys verifies signatures; GoogleKeys in production, a test key set
	// in tests.
	Keys oidc.KeySet
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// GoogleKeys returns Google's signing keys, fetched when first needed and
// again when a token names a key not seen yet (go-oidc's RemoteKeySet).
func GoogleKeys(ctx context.Context) oidc.KeySet {
	return oidc.NewRemoteKeySet(ctx, googleCertsURL)
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
		return PushIdentity{}, fmt.Errorf("%w: token audience %q is not the configured --pubsub-audience %q", ErrPushForbidden, tok.Audience, a.Audience)
	}
	var c pushClaims
	if err := tok.Claims(&c); err != nil {
		return PushIdentity{}, fmt.Errorf("%w: unreadable claims: %v", ErrPushUnauthenticated, err)
	}
	// Google's emails are lowercase; an exact match is what a service
	// account is.
	if c.Email != a.ServiceAccount {
		return PushIdentity{}, fmt.Errorf("%w: token email %q is not the configured --pubsub-service-account %q", ErrPushForbidden, c.Email, a.ServiceAccount)
	}
	if verified, ok := c.EmailVerified.(bool); !ok || !verified {
		return PushIdentity{}, fmt.Errorf("%w: token email %q is not verified (email_verified is %v, want true)", ErrPushForbidden, c.Email, c.EmailVerified)
	}
	return PushIdentity{Email: c.Email, Subject: tok.Subject}, nil
}
