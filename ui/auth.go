package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-chi/chi/v5/middleware"
)

const sessionCookie = "bucketops_session"

// session is what the cookie holds, signed and encrypted.
type session struct {
	Who     string // "reader token", "alice (auditor token)", or the IAP user's email
	Expires int64
	// Auditor is the auditor token's name, empty for other logins: its
	// requests are written to the access log.
	Auditor string
}

// IAP trusts Google Cloud Identity-Aware Proxy's signed header
// (x-goog-iap-jwt-assertion) when the bridge sits behind it: the token is
// checked as Google documents it (ES256, issuer https://cloud.google.com/iap,
// audience /projects/NUMBER/global/backendServices/ID), so a request that
// didn't come through the proxy can't claim to have.
type IAP struct {
	// Audience is the backend service's signed-header audience.
	Audience string
	// Keys verifies IAP's signatures: the keys at
	// https://www.gstatic.com/iap/verify/public_key-jwk.
	Keys oidc.KeySet
}

const (
	iapHeader = "X-Goog-Iap-Jwt-Assertion"
	iapIssuer = "https://cloud.google.com/iap"
	// IAPKeysURL publishes the keys IAP signs its header with.
	IAPKeysURL = "https://www.gstatic.com/iap/verify/public_key-jwk"
)

// verify returns who IAP says the request comes from.
func (p *IAP) verify(ctx context.Context, raw string) (string, error) {
	v := oidc.NewVerifier(iapIssuer, p.Keys, &oidc.Config{ClientID: p.Audience, SupportedSigningAlgs: []string{oidc.ES256}})
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return "", err
	}
	var c struct {
		Email string `json:"email"`
	}
	if err := tok.Claims(&c); err != nil || c.Email == "" {
		return "", err
	}
	return c.Email, nil
}

// requireSession lets through requests with a valid session cookie or IAP
// header; others are sent to the login form, where they come back after.
func (u *UI) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			u.bearer(w, r, next)
			return
		}
		if u.cfg.IAP != nil {
			if raw := r.Header.Get(iapHeader); raw != "" {
				if who, err := u.cfg.IAP.verify(r.Context(), raw); err == nil {
					next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, who)))
					return
				}
				u.log.Info("ui: IAP header refused")
			}
		}
		if c, err := r.Cookie(sessionCookie); err == nil {
			var s session
			if err := u.cookies.Decode(sessionCookie, c.Value, &s); err == nil && u.now().Unix() < s.Expires {
				u.serveLogged(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, s.Who)), s.Auditor, next)
				return
			}
			// Tampered, expired or from other keys: forget it.
			u.clearSession(w, r)
		}
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	})
}

// bearer serves the activity export to a request with a reader or auditor
// bearer token, so a scheduled report needs no browser. Bearer tokens
// reach nothing else of the pages: those take a login.
func (u *UI) bearer(w http.ResponseWriter, r *http.Request, next http.Handler) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	whom, auditor, ok := "", "", false
	if strings.EqualFold(scheme, "Bearer") && token != "" {
		whom, auditor, ok = u.identify(token)
	}
	if !ok {
		u.log.Info("ui: bearer token refused", "path", r.URL.Path)
		w.Header().Set("WWW-Authenticate", `Bearer realm="bucketops"`)
		http.Error(w, "invalid bearer token: the activity export takes a reader or auditor token", http.StatusUnauthorized)
		return
	}
	if format := r.URL.Query().Get("format"); r.URL.Path != "/ui/activity" || (format != "csv" && format != "json") {
		http.Error(w, "a bearer token reaches only the activity export, /ui/activity?format=csv or json; log in at /ui/login for the pages", http.StatusForbidden)
		u.logAuditor(r, auditor, http.StatusForbidden)
		return
	}
	u.serveLogged(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, whom)), auditor, next)
}

// identify returns who a token logs in as: the reader token, or an
// auditor token and its name.
func (u *UI) identify(token string) (who, auditor string, ok bool) {
	if u.cfg.Authenticate(token) {
		return "reader token", "", true
	}
	if u.cfg.Auditor != nil {
		if name, ok := u.cfg.Auditor(token); ok {
			return name + " (auditor token)", name, true
		}
	}
	return "", "", false
}

// serveLogged serves the request, and writes the access log line when an
// auditor makes it.
func (u *UI) serveLogged(w http.ResponseWriter, r *http.Request, auditor string, next http.Handler) {
	if auditor == "" {
		next.ServeHTTP(w, r)
		return
	}
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	next.ServeHTTP(ww, r)
	u.logAuditor(r, auditor, ww.Status())
}

// logAuditor writes the access log's line for a request of an auditor:
// the same line the bridge's API writes (package webhook), never the token.
func (u *UI) logAuditor(r *http.Request, auditor string, status int) {
	if auditor == "" {
		return
	}
	u.log.Info("auditor access", "auditor", auditor, "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
		"status", status, "request_id", middleware.GetReqID(r.Context()))
}

type whoKey struct{}

// who is the signed-in auditor.
func who(r *http.Request) string {
	s, _ := r.Context().Value(whoKey{}).(string)
	return s
}

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

// login takes the token from the form, never from the URL, and logs
// neither.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		u.fail(w, r, http.StatusBadRequest, "Bad login", "The form could not be read.")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	token := strings.TrimSpace(r.PostForm.Get("token"))
	whom, auditor, ok := "", "", false
	if token != "" {
		whom, auditor, ok = u.identify(token)
	}
	if !ok {
		u.log.Info("ui: login refused", "remote", r.RemoteAddr)
		u.render(w, r, http.StatusUnauthorized, "login", map[string]any{"Next": next, "Error": "That token isn't a reader or auditor token of this bridge."})
		return
	}
	value, err := u.cookies.Encode(sessionCookie, session{Who: whom, Expires: u.now().Add(u.ttl).Unix(), Auditor: auditor})
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, "Login failed", "The session could not be made.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/ui/", MaxAge: int(u.ttl / time.Second),
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
	u.logAuditor(r, auditor, http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	u.clearSession(w, r)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

func (u *UI) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
}

// secure reports whether the browser reached us over TLS, directly or
// through a proxy that says so: then the cookie is Secure.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext keeps a post-login redirect on the UI's own pages.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, `\`) {
		return next
	}
	return "/ui/apps"
}
