// Package webhook is the bridge's HTTP surface: the manifest API the Argo CD
// plugin calls, the apps, history and deploy status API, the Pub/Sub push
// endpoint, health and metrics, and the mounts of the git view (/git/) and
// the auditors' pages (/ui/).
//
// The contract that matters: a manifest response is either the complete,
// verified, decrypted release or an error status with nothing Argo CD could
// apply. Every route but /healthz, /readyz and /metrics needs a bearer token
// whose role allows it, or for Pub/Sub push, Google's OIDC token.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/singleflight"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
)

// Releases is what the server reads from the bucket.
type Releases interface {
	Head(ctx context.Context, app string) (store.Release, error)
	Stat(ctx context.Context, ref store.Ref) (store.Release, error)
	Read(ctx context.Context, ref store.Ref) (store.Release, []byte, error)
	History(ctx context.Context, app string, opts store.HistoryOptions) ([]store.Release, error)
	List(ctx context.Context, prefix string) ([]store.Release, error)
	Ping(ctx context.Context) error
}

// Renderer turns a stored release into what Argo CD applies.
type Renderer interface {
	Render(data []byte, opts secrets.Options) (secrets.Output, error)
}

// Policies hands out the tenancy policy in force (watch.Watcher).
type Policies interface {
	Current() *policy.Policy
}

// Trusts hands out the trust policy in force (a watch.Watcher of
// provenance.TrustPolicy).
type Trusts interface {
	Current() *provenance.TrustPolicy
}

// Floors judges each release served under require: signed against its
// app's rollback floor (floor.Floors).
type Floors interface {
	Admit(ctx context.Context, app string, served floor.Claim, head func(context.Context) (floor.Claim, error)) error
}

// Callers resolves the Argo CD Application a manifest request is made for
// (deploy.Deployer).
type Callers interface {
	Caller(ctx context.Context, instance string) (deploy.Caller, error)
}

// Config is the server's dependencies and limits.
type Config struct {
	Releases Releases
	Renderer Renderer
	Tokens   []Token
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// CacheBytes bounds the memory held by cached renders; 0 disables the cache.
	CacheBytes int64
	// Memory is the bridge's render memory, shared with the auditors'
	// pages: a cold render waits for its release's memory.Cost; nil means
	// no bound.
	Memory *memory.Budget
	// Policy, when not nil, is the tenancy policy every render is checked
	// against; Callers then resolves the Application asking.
	Policy  Policies
	Callers Callers
	// Trust, when not nil, is the trust policy: each release is verified
	// against the keys its rule names before it is rendered, and refused
	// under require: signed when it doesn't verify.
	Trust Trusts
	// Floors, when not nil, keeps each app's rollback floor: under
	// require: signed a release older than one already accepted is refused
	// unless the app's head still descends from it (package floor).
	Floors Floors
	// RequestTimeout bounds each request, outbound calls included.
	RequestTimeout time.Duration
	// ReadyInterval is how long one bucket check answers /readyz (default
	// 5s): anyone may call it, the bucket is listed at most once per
	// interval.
	ReadyInterval time.Duration
	// Deploys takes bucket notifications, hears which generation was served
	// to which Application, and answers deploy status. Nil turns the status
	// and Pub/Sub push routes off.
	Deploys *deploy.Deployer
	// Location is where the releases live: notifications for anything else
	// are ignored.
	Location store.Location
	// Push authenticates Pub/Sub push deliveries; nil turns the push route
	// off.
	Push *PushAuth
	// Git serves each app's releases as a git repository under /git/ (the
	// gitview package), behind HTTP basic authentication with the reader
	// token; nil turns it off.
	Git http.Handler
	// UI serves the auditors' pages under /ui/ (the ui package), which
	// authenticate on their own; nil turns them off.
	UI http.Handler
	// Generator answers Argo CD's ApplicationSet plugin generator at
	// /api/v1/getparams.execute (the appset package), behind the
	// generator token; nil turns it off.
	Generator http.Handler
}

// Validate reports every missing dependency.
func (c Config) Validate() error {
	var errs []error
	if c.Releases == nil {
		errs = append(errs, errors.New("no releases store"))
	}
	if c.Renderer == nil {
		errs = append(errs, errors.New("no renderer"))
	}
	if len(c.Tokens) == 0 {
		errs = append(errs, errors.New("no bearer token: give at least one --token-file"))
	}
	auditors := map[string]bool{}
	for _, t := range c.Tokens {
		switch {
		case t.Role == RoleAuditor && t.Name == "":
			errs = append(errs, errors.New("an auditor token without a name"))
		case t.Role == RoleAuditor && auditors[t.Name]:
			// The access log must tell them apart.
			errs = append(errs, fmt.Errorf("two auditor tokens named %q: name each file after its holder", t.Name))
		case t.Role == RoleAuditor:
			auditors[t.Name] = true
		}
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("no logger"))
	}
	if c.Registry == nil {
		errs = append(errs, errors.New("no metrics registry"))
	}
	if c.CacheBytes < 0 {
		errs = append(errs, errors.New("negative cache size"))
	}
	if c.Push != nil {
		if c.Deploys == nil {
			errs = append(errs, errors.New("pubsub push needs a deployer"))
		}
		if err := c.Push.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Server serves the bridge's HTTP API.
type Server struct {
	releases Releases
	renderer Renderer
	tokens   []Token
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics
	cache    *renderCache
	inflight singleflight.Group
	// memory admits cold renders by weight; nil when unbounded.
	memory    *memory.Budget
	policy    Policies
	callers   Callers
	trust     Trusts
	floors    Floors
	git       http.Handler
	ui        http.Handler
	generator http.Handler
	ready     readiness
	timeout   time.Duration
	deploys   *deploy.Deployer
	location  store.Location
	push      *PushAuth
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.ReadyInterval == 0 {
		cfg.ReadyInterval = 5 * time.Second
	}
	srv := &Server{
		releases:  cfg.Releases,
		renderer:  cfg.Renderer,
		tokens:    cfg.Tokens,
		log:       cfg.Logger,
		registry:  cfg.Registry,
		metrics:   newMetrics(cfg.Registry),
		cache:     newCache(cfg.CacheBytes),
		timeout:   cfg.RequestTimeout,
		deploys:   cfg.Deploys,
		location:  cfg.Location,
		push:      cfg.Push,
		policy:    cfg.Policy,
		callers:   cfg.Callers,
		trust:     cfg.Trust,
		floors:    cfg.Floors,
		git:       cfg.Git,
		ui:        cfg.UI,
		generator: cfg.Generator,
		ready:     readiness{interval: cfg.ReadyInterval},
		memory:    cfg.Memory,
	}
	return srv, nil
}

// maxBodyBytes caps request bodies; no route takes a large one.
const maxBodyBytes = 1 << 20

// Routes builds the router.
func (s *Server) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID)
	r.Use(s.logRequests)
	r.Use(middleware.Recoverer)
	r.Use(middleware.Timeout(s.timeout))
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
			next.ServeHTTP(w, r)
		})
	})

	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))

	r.With(s.require(RoleReader, RoleAuditor)).Get("/v1/apps", s.listApps)
	if s.push != nil {
		r.Post("/v1/pubsub/push", s.pubsubPush)
	}
	// App paths hold slashes: /v1/apps/prod/payments/-/releases.
	r.Get("/v1/apps/*", s.appRoute)
	if s.git != nil {
		r.Handle("/git/*", s.requireBasic(RoleReader)(http.StripPrefix("/git", s.git)))
	}
	if s.generator != nil {
		r.With(s.require(RoleGenerator)).Post("/api/v1/getparams.execute", s.generator.ServeHTTP)
	}
	if s.ui != nil {
		r.Handle("/ui", s.ui)
		r.Handle("/ui/*", s.ui)
		// A browser pointed at the bridge lands on the pages, which ask
		// it to log in; the redirect itself reveals nothing.
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/ui/", http.StatusFound)
		})
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "no_route", fmt.Errorf("no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Errorf("%s is not allowed on %s", r.Method, r.URL.Path))
	})
	return r
}

// appRoute splits /v1/apps/{app}/-/{action} and dispatches with the right role.
func (s *Server) appRoute(w http.ResponseWriter, r *http.Request) {
	// The escaped path: an encoded slash or dot must not become part of an app.
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/apps/")
	app, action, found := strings.Cut(rest, "/-/")
	if !found {
		s.fail(w, r, http.StatusNotFound, "no_route", fmt.Errorf("no route %s: use /v1/apps/APP/-/releases, /v1/apps/APP/-/manifests or /v1/apps/APP/-/status", r.URL.Path))
		return
	}
	if strings.Contains(app, "%") {
		s.fail(w, r, http.StatusBadRequest, "invalid_app", fmt.Errorf("%w %q: percent-encoded characters are not allowed in an app path", store.ErrInvalidApp, app))
		return
	}
	if err := store.ValidateApp(app); err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_app", err)
		return
	}
	var h http.Handler
	switch action {
	case "releases":
		h = s.require(RoleReader, RoleAuditor)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.releasesOf(w, r, app) }))
	case "manifests":
		h = s.require(RolePlugin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.manifests(w, r, app) }))
	case "status":
		h = s.require(RoleReader, RoleAuditor)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.deployStatus(w, r, app) }))
	case "deploys":
		h = s.require(RoleReader, RoleAuditor)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.deploysOf(w, r, app) }))
	default:
		s.fail(w, r, http.StatusNotFound, "no_route", fmt.Errorf("unknown action %q: use releases, manifests, status or deploys", action))
		return
	}
	h.ServeHTTP(w, r)
}

// readiness caches the last bucket check.
type readiness struct {
	interval time.Duration
	mu       sync.Mutex
	checked  time.Time
	err      error
}

// readyz answers whether the bucket can be listed, from a check at most
// ReadyInterval old. It is open to all, like /healthz, so it says why in
// one stable word; the bucket's own error goes to the log.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.ready.mu.Lock()
	if time.Since(s.ready.checked) >= s.ready.interval {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		err := s.releases.Ping(ctx)
		cancel()
		switch {
		case err != nil && (s.ready.err == nil || s.ready.checked.IsZero()):
			s.log.Warn("not ready: the bucket can't be listed", "error", err)
		case err == nil && s.ready.err != nil:
			s.log.Info("ready: the bucket can be listed again")
		}
		s.ready.checked, s.ready.err = time.Now(), err
	}
	err := s.ready.err
	s.ready.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "the bucket can't be reached; the bridge's log says why", Reason: "bucket_unreachable"})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ready\n"))
}

// errorBody is every error response.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	// Message, on a failed render, is the one line the plugin prints for
	// Argo CD: the release, what refused it and what to do (refusal).
	Message string `json:"message,omitempty"`
}

// fail writes an error response; reason is stable for scripts and metrics.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, reason string, err error) {
	s.failWith(w, r, status, errorBody{Error: err.Error(), Reason: reason}, err)
}

// failWith writes body as the error response to a request that failed
// with err, logging err.
func (s *Server) failWith(w http.ResponseWriter, r *http.Request, status int, body errorBody, err error) {
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "request failed", "path", r.URL.Path, "status", status, "reason", body.Reason, "error", err, "request_id", middleware.GetReqID(r.Context()))
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// logRequests logs each request's outcome; never its headers, which carry tokens.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", ww.Status(), "bytes", ww.BytesWritten(),
			"duration", time.Since(start), "request_id", middleware.GetReqID(r.Context()))
	})
}
