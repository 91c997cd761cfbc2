// Package ui owns the auditors' web pages on the bridge, under /ui/: every
// app's releases as a tree and a timeline, each release's record and
// objects, the diff of any two releases, what was live at a time T, and
// the publishes of a time window, exported as CSV and JSON.
//
// The contract that matters: no page ever shows a decrypted Secret. The
// pages read releases as the bucket stores them and show SOPS-encrypted
// and plaintext Secret values redacted (render.Object.Redacted); nothing
// here can decrypt. Every page but the login form needs a session, made
// by logging in with a reader or auditor token (or by Google Cloud IAP's
// signed header), held in a signed, encrypted, expiring cookie that any
// replica with the same tokens accepts. The activity export also takes
// either token as a bearer token, for scheduled reports.
package ui

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/securecookie"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Releases is what the pages read from the bucket (store.Store).
type Releases interface {
	Head(ctx context.Context, app string) (store.Release, error)
	History(ctx context.Context, app string, opts store.HistoryOptions) ([]store.Release, error)
	List(ctx context.Context, prefix string) ([]store.Release, error)
	ListPage(ctx context.Context, prefix string, opts store.ListOptions) ([]store.Release, string, error)
	Histories(ctx context.Context, prefix string, opts store.HistoriesOptions, fn func(app string, newestFirst []store.Release) bool) error
	Stat(ctx context.Context, ref store.Ref) (store.Release, error)
	Read(ctx context.Context, ref store.Ref) (store.Release, []byte, error)
}

// Statuses tells whether a release is live in Argo CD (deploy.Deployer).
type Statuses interface {
	Status(ctx context.Context, app string, generation int64) (deploy.Status, error)
}

// Config is the pages' dependencies and settings.
type Config struct {
	Releases Releases
	// Statuses, when not nil, gives the apps page its live column.
	Statuses Statuses
	// Deploys, when not nil, gives the timeline, the release page and the
	// as-of page what Argo CD ran, from its own record; without it they
	// say that deploys are unknown (no Argo CD).
	Deploys  Deploys
	Location store.Location
	// Authenticate reports whether a token may read (the reader token).
	Authenticate func(token string) bool
	// Auditor, when not nil, returns the name of an auditor token: it
	// logs in as that name, and every request it makes, by session or
	// by bearer token on the activity export, is a line of the access
	// log.
	Auditor func(token string) (name string, ok bool)
	// SessionSecret keys the session cookies (at least 32 bytes): the same
	// on every replica, so a session works on any of them, and secret.
	SessionSecret []byte
	// SessionTTL is how long a login lasts (default 8h).
	SessionTTL time.Duration
	// IAP, when not nil, accepts Google Cloud IAP's signed header instead
	// of a login.
	IAP    *IAP
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// HistoryBytes bounds the app histories the pages keep in memory,
	// least recently used evicted first (about 0.5 KiB per release);
	// 0 means DefaultHistoryBytes, a negative number keeps none.
	HistoryBytes int64
	// Memory is the bridge's render memory, shared with the renders for
	// Argo CD: a release page waits for its release's memory.Cost, a diff
	// for both releases'; nil means no bound.
	Memory *memory.Budget
	// MemoryWait is how long a page waits for Memory before it answers
	// 503 (default DefaultMemoryWait).
	MemoryWait time.Duration
	// Trust, when not nil, returns the trust policy in force (the bridge's
	// watcher of --trust-policy, so a reload shows at the next page): the
	// timeline, release page and activity judge each release's signature
	// by its rule for the app, with the checks the bridge makes before
	// serving (provenance.Judge). Nil, or a nil policy: "not checked".
	Trust func() *provenance.TrustPolicy
	// MaxActivity bounds the publishes one activity answer lists, the
	// newest of its window (0: DefaultMaxActivity). An answer that
	// leaves some out says so: the page in words, the exports in their
	// Bucketops-Truncated header, the JSON export in "truncated" too.
	MaxActivity int
}

// DefaultMaxActivity is the most publishes one activity answer lists by
// default.
const DefaultMaxActivity = 10_000

// TruncatedHeader is set on an activity export (CSV or JSON) that lists
// only the newest of its window's publishes: "LISTED of SEEN".
const TruncatedHeader = "Bucketops-Truncated"

// DefaultMemoryWait is how long a page waits for render memory by default.
const DefaultMemoryWait = 10 * time.Second

// MaxDiffBytes is the largest release a diff page compares: a diff holds
// both releases, their objects and the diff's text, and a page of more
// than a few MiB of diff is read by no one. Larger ones are compared with
// bucketops diff, which the refusal names.
const MaxDiffBytes = 4 << 20

// DefaultHistoryBytes is the memory the pages keep histories in by default.
const DefaultHistoryBytes = 64 << 20

// Validate reports every missing dependency.
func (c Config) Validate() error {
	var errs []error
	if c.Releases == nil {
		errs = append(errs, errors.New("ui: no releases"))
	}
	if c.Authenticate == nil {
		errs = append(errs, errors.New("ui: no authentication"))
	}
	if len(c.SessionSecret) < 32 {
		errs = append(errs, errors.New("ui: the session secret must be at least 32 bytes"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("ui: no logger"))
	}
	return errors.Join(errs...)
}

// UI serves the pages.
type UI struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	cookies   *securecookie.SecureCookie
	ttl       time.Duration
	histories *histories
	pages     map[string]*template.Template
	// signatures judges releases' signatures by Config.Trust.
	signatures *signatures
	// commits are the releases' commits in the git view.
	commits *commits
}

// New returns the pages for cfg.
func New(cfg Config) (*UI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MemoryWait == 0 {
		cfg.MemoryWait = DefaultMemoryWait
	}
	if cfg.HistoryBytes == 0 {
		cfg.HistoryBytes = DefaultHistoryBytes
	}
	if cfg.MaxActivity <= 0 {
		cfg.MaxActivity = DefaultMaxActivity
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, cfg.SessionSecret)
		m.Write([]byte("bucketops ui " + label))
		return m.Sum(nil)
	}
	sc := securecookie.New(derive("session signing"), derive("session encryption"))
	sc.MaxAge(int(cfg.SessionTTL / time.Second))
	u := &UI{cfg: cfg, log: cfg.Logger, now: cfg.Now, cookies: sc, ttl: cfg.SessionTTL,
		histories: newHistories(cfg.Releases, cfg.HistoryBytes), pages: map[string]*template.Template{}}
	u.signatures = newSignatures(cfg.Trust)
	u.commits = newCommits(cfg.Location)
	for _, page := range []string{"login", "apps", "timeline", "release", "diff", "asof", "activity", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", page, err)
		}
		u.pages[page] = t
	}
	return u, nil
}

// CachedBytes returns the bytes of the app histories the pages keep in
// memory, at most Config.HistoryBytes: what the bridge's
// bucketops_ui_history_cache_bytes gauge reports.
func (u *UI) CachedBytes() int64 { return u.histories.bytes() }

// Handler serves the pages under /ui/.
func (u *UI) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	static, _ := fs.Sub(assets, "static")
	r.Handle("/ui/static/*", http.StripPrefix("/ui/static/", http.FileServer(http.FS(static))))
	r.Get("/ui/login", u.loginForm)
	r.Post("/ui/login", u.login)
	r.Group(func(r chi.Router) {
		r.Use(u.requireSession)
		r.Get("/ui", redirect("/ui/apps"))
		r.Get("/ui/", redirect("/ui/apps"))
		r.Post("/ui/logout", u.logout)
		r.Get("/ui/apps", u.apps)
		r.Get("/ui/apps/*", u.appRoute)
		r.Get("/ui/asof", u.asOf)
		r.Get("/ui/activity", u.activity)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		u.fail(w, r, http.StatusNotFound, "No such page", "There is no page at "+r.URL.Path+".")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		u.fail(w, r, http.StatusMethodNotAllowed, "Not allowed", r.Method+" is not allowed here.")
	})
	return r
}

func redirect(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusSeeOther) }
}

// securityHeaders keeps the pages out of frames and caches, and lets them
// load nothing but their own stylesheet.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
