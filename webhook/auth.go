package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
)

// Role is what a bearer token may do.
type Role string

const (
	// RolePlugin may read rendered manifests, and nothing else: it is the
	// token the Argo CD plugin holds, next to decrypted Secrets.
	RolePlugin Role = "plugin"
	// RoleReader may read everything but manifests: apps, history, status.
	RoleReader Role = "reader"
	// RoleGenerator may list the apps for Argo CD's ApplicationSet plugin
	// generator (the appset package), and nothing else.
	RoleGenerator Role = "generator"
)

// minTokenBytes keeps guessable tokens out.
const minTokenBytes = 16

// Token is one bearer token and its role. Only its hash is kept.
type Token struct {
	Role Role
	hash [sha256.Size]byte
}

// LoadToken reads a token from a file: its content, trimmed of surrounding
// whitespace, is the bearer token.
func LoadToken(role Role, path string) (Token, error) {
	if role != RolePlugin && role != RoleReader && role != RoleGenerator {
		return Token{}, fmt.Errorf("token file %s: unknown role %q, use plugin, reader or generator", path, role)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Token{}, fmt.Errorf("token file: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if len(secret) < minTokenBytes || strings.ContainsAny(secret, " \t\r\n") {
		return Token{}, fmt.Errorf("token file %s: a token is one line of at least %d characters without spaces (openssl rand -hex 32)", path, minTokenBytes)
	}
	return NewToken(role, secret), nil
}

// NewToken makes a token from its secret value.
func NewToken(role Role, secret string) Token {
	return Token{Role: role, hash: sha256.Sum256([]byte(secret))}
}

var (
	errNoToken   = errors.New("missing bearer token: send Authorization: Bearer <token>")
	errBadToken  = errors.New("invalid bearer token")
	errWrongRole = errors.New("this token's role may not use this route")
	errNoBasic   = errors.New("missing credentials: git repositories take HTTP basic authentication, any user name and the reader token as password")
)

// authenticate returns the roles of the request's bearer token (a token
// file may be given for more than one role). Every configured token is
// compared, in constant time, on hashes of equal length, so neither timing
// nor length tells how close a guess was.
func (s *Server) authenticate(r *http.Request) ([]Role, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, errNoToken
	}
	return s.rolesOf(strings.TrimSpace(secret))
}

// rolesOf returns the roles of a token's secret.
func (s *Server) rolesOf(secret string) ([]Role, error) {
	got := sha256.Sum256([]byte(secret))
	var roles []Role
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(got[:], t.hash[:]) == 1 {
			roles = append(roles, t.Role)
		}
	}
	if len(roles) == 0 {
		return nil, errBadToken
	}
	return roles, nil
}

// HasRole reports whether secret is the secret of one of tokens with role,
// comparing hashes in constant time.
func HasRole(tokens []Token, secret string, role Role) bool {
	got := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	ok := false
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(got[:], t.hash[:]) == 1 && t.Role == role {
			ok = true
		}
	}
	return ok
}

// DeriveKey derives a secret key for label from the tokens of role: the
// same on every replica given the same token files, changed when they
// are rotated; nil when there is no such token.
func DeriveKey(tokens []Token, role Role, label string) []byte {
	m := hmac.New(sha256.New, []byte("bucketops "+label))
	n := 0
	for _, t := range tokens {
		if t.Role == role {
			m.Write(t.hash[:])
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return m.Sum(nil)
}

// requireBasic lets through requests whose HTTP basic password is a token
// with the role, whatever the user name: how git and Argo CD send
// repository credentials. A request without them gets a 401 with
// WWW-Authenticate: Basic, which is what makes git's askpass helper (and
// so Argo CD's repo-server) send them.
func (s *Server) requireBasic(role Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, password, ok := r.BasicAuth()
			var got []Role
			err := errNoBasic
			if ok {
				got, err = s.rolesOf(password)
			}
			switch {
			case err != nil:
				s.metrics.authFailures.WithLabelValues("unauthenticated").Inc()
				w.Header().Set("WWW-Authenticate", `Basic realm="bucketops"`)
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			case !slices.Contains(got, role):
				s.metrics.authFailures.WithLabelValues("forbidden").Inc()
				http.Error(w, fmt.Sprintf("%v: a %s token, %s needed", errWrongRole, got[0], role), http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// require lets through requests whose token has the role.
func (s *Server) require(role Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, err := s.authenticate(r)
			switch {
			case err != nil:
				s.metrics.authFailures.WithLabelValues("unauthenticated").Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="bucketops"`)
				s.fail(w, r, http.StatusUnauthorized, "unauthenticated", err)
				return
			case !slices.Contains(got, role):
				s.metrics.authFailures.WithLabelValues("forbidden").Inc()
				s.fail(w, r, http.StatusForbidden, "forbidden", fmt.Errorf("%w: a %s token, %s needed", errWrongRole, got[0], role))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
