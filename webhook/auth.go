package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5/middleware"
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
	// RoleAuditor may read what the reader reads through the API (apps,
	// history, status) and the activity export, and log in to the
	// auditors' pages; never manifests, push, the generator or the git
	// view. Its tokens are named, one per person or team, and every
	// request one makes is logged with the name.
	RoleAuditor Role = "auditor"
)

// auditorName is what an auditor token's name may be: the file's base
// name without its extension, so alice.token is alice.
var auditorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$`)

// minTokenBytes keeps guessable tokens out.
const minTokenBytes = 16

// Token is one bearer token and its role. Only its hash is kept.
type Token struct {
	Role Role
	// Name names an auditor token's holder in the pages and the access
	// log; empty for the other roles.
	Name string
	hash [sha256.Size]byte
}

// LoadToken reads a token from a file: its content, trimmed of surrounding
// whitespace, is the bearer token. An auditor token is named by the file's
// base name without its extension: /etc/bucketops/auditors/alice.token is
// alice.
func LoadToken(role Role, path string) (Token, error) {
	if role != RolePlugin && role != RoleReader && role != RoleGenerator && role != RoleAuditor {
		return Token{}, fmt.Errorf("token file %s: unknown role %q, use plugin, reader, generator or auditor", path, role)
	}
	var name string
	if role == RoleAuditor {
		base := filepath.Base(path)
		name = strings.TrimSuffix(base, filepath.Ext(base))
		if !auditorName.MatchString(name) {
			return Token{}, fmt.Errorf("token file %s: an auditor token is named by its file's name without extension (alice.token is alice): %q is not a name of letters, digits and . _ @ + -, up to 64", path, name)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Token{}, fmt.Errorf("token file: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if len(secret) < minTokenBytes || strings.ContainsAny(secret, " \t\r\n") {
		return Token{}, fmt.Errorf("token file %s: a token is one line of at least %d characters without spaces (openssl rand -hex 32)", path, minTokenBytes)
	}
	t := NewToken(role, secret)
	t.Name = name
	return t, nil
}

// NewAuditorToken makes an auditor token named name from its secret value.
func NewAuditorToken(name, secret string) Token {
	t := NewToken(RoleAuditor, secret)
	t.Name = name
	return t
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

// caller is who a request's token is: its roles, and the auditor's name
// when it is an auditor token.
type caller struct {
	roles   []Role
	auditor string
}

// may reports whether the caller has one of roles.
func (c caller) may(roles []Role) bool {
	return slices.ContainsFunc(roles, func(r Role) bool { return slices.Contains(c.roles, r) })
}

// authenticate returns the roles of the request's bearer token (a token
// file may be given for more than one role). Every configured token is
// compared, in constant time, on hashes of equal length, so neither timing
// nor length tells how close a guess was.
func (s *Server) authenticate(r *http.Request) (caller, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return caller{}, errNoToken
	}
	return s.callerOf(strings.TrimSpace(secret))
}

// callerOf returns who a token's secret is.
func (s *Server) callerOf(secret string) (caller, error) {
	got := sha256.Sum256([]byte(secret))
	var c caller
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(got[:], t.hash[:]) == 1 {
			c.roles = append(c.roles, t.Role)
			if t.Role == RoleAuditor {
				c.auditor = t.Name
			}
		}
	}
	if len(c.roles) == 0 {
		return caller{}, errBadToken
	}
	return c, nil
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

// AuditorName returns the name of the auditor token whose secret is
// secret, comparing hashes in constant time.
func AuditorName(tokens []Token, secret string) (string, bool) {
	got := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	name, ok := "", false
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(got[:], t.hash[:]) == 1 && t.Role == RoleAuditor {
			name, ok = t.Name, true
		}
	}
	return name, ok
}

// DeriveKey derives a secret key for label from the tokens of the roles:
// the same on every replica given the same token files, changed when one
// is rotated, added or removed; nil when there is no such token.
func DeriveKey(tokens []Token, label string, roles ...Role) []byte {
	m := hmac.New(sha256.New, []byte("bucketops "+label))
	n := 0
	for _, t := range tokens {
		if slices.Contains(roles, t.Role) {
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
			var got caller
			err := errNoBasic
			if ok {
				got, err = s.callerOf(password)
			}
			switch {
			case err != nil:
				s.metrics.authFailures.WithLabelValues("unauthenticated").Inc()
				w.Header().Set("WWW-Authenticate", `Basic realm="bucketops"`)
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			case !got.may([]Role{role}):
				s.metrics.authFailures.WithLabelValues("forbidden").Inc()
				http.Error(w, fmt.Sprintf("%v: the token's role is %s, %s needed", errWrongRole, got.roles[0], role), http.StatusForbidden)
				s.logAuditor(r, got, http.StatusForbidden)
				return
			}
			s.serveLogged(w, r, got, next)
		})
	}
}

// require lets through requests whose token has one of the roles.
func (s *Server) require(roles ...Role) func(http.Handler) http.Handler {
	needed := make([]string, len(roles))
	for i, r := range roles {
		needed[i] = string(r)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, err := s.authenticate(r)
			switch {
			case err != nil:
				s.metrics.authFailures.WithLabelValues("unauthenticated").Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="bucketops"`)
				s.fail(w, r, http.StatusUnauthorized, "unauthenticated", err)
				return
			case !got.may(roles):
				s.metrics.authFailures.WithLabelValues("forbidden").Inc()
				s.fail(w, r, http.StatusForbidden, "forbidden", fmt.Errorf("%w: the token's role is %s, %s needed", errWrongRole, got.roles[0], strings.Join(needed, " or ")))
				s.logAuditor(r, got, http.StatusForbidden)
				return
			}
			s.serveLogged(w, r, got, next)
		})
	}
}

// serveLogged serves the request, and writes the access log line when the
// caller is an auditor.
func (s *Server) serveLogged(w http.ResponseWriter, r *http.Request, c caller, next http.Handler) {
	if c.auditor == "" {
		next.ServeHTTP(w, r)
		return
	}
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	next.ServeHTTP(ww, r)
	s.logAuditor(r, c, ww.Status())
}

// logAuditor writes the access log's line for a request an auditor token
// made: who, what and the answer's status; never the token. The ui
// package writes the same line for the pages.
func (s *Server) logAuditor(r *http.Request, c caller, status int) {
	if c.auditor == "" {
		return
	}
	s.log.Info("auditor access", "auditor", c.auditor, "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
		"status", status, "request_id", middleware.GetReqID(r.Context()))
}
