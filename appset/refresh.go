package appset

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/store"
)

// Heads reads the bucket's heads (store.Store).
type Heads interface {
	Lister
	Head(ctx context.Context, app string) (store.Release, error)
}

// ApplicationSets asks the ApplicationSet controller to run the generator
// again, for every ApplicationSet that uses it (Kube).
type ApplicationSets interface {
	Refresh(ctx context.Context) (int, error)
}

// RefresherConfig is what the refresher needs.
type RefresherConfig struct {
	Releases Heads
	Sets     ApplicationSets
	// Coalesce is how long the first change waits for more before the
	// refresh (default 1s): a release of 200 apps at once is one refresh.
	Coalesce time.Duration
	// Resync lists the whole bucket this often, catching changes no event
	// announced (default 5m; the bridge's poll also feeds Observe).
	Resync time.Duration
	// MinBackoff and MaxBackoff bound retries of a failed refresh
	// (defaults 1s and 1m).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	Registry               prometheus.Registerer
}

// Refresher watches the fleet's shape (which apps are live, with which
// labels) and refreshes the ApplicationSets when it changes: an app's
// first release, its retirement, its return, a change of labels. A release
// that changes none of these refreshes nothing: the Application follows
// main already.
type Refresher struct {
	cfg     RefresherConfig
	log     *slog.Logger
	metrics refresherMetrics

	mu    sync.Mutex
	dirty map[string]bool // apps an event named since the last look
	wake  chan struct{}

	// Owned by Run's goroutine.
	known map[string]string // live app → its labels, encoded
}

type refresherMetrics struct {
	refreshes *prometheus.CounterVec
	looks     *prometheus.CounterVec
}

// NewRefresher returns a Refresher for cfg.
func NewRefresher(cfg RefresherConfig) (*Refresher, error) {
	if cfg.Releases == nil || cfg.Sets == nil {
		return nil, errors.New("appset: a refresher needs releases and ApplicationSets")
	}
	cfg.Coalesce = cmp.Or(cfg.Coalesce, time.Second)
	cfg.Resync = cmp.Or(cfg.Resync, 5*time.Minute)
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, time.Second)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, time.Minute)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	m := refresherMetrics{refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketops_applicationset_refreshes_total",
		Help: "Requests to the ApplicationSet controller to run the generator again, by outcome (ok, error).",
	}, []string{"outcome"}), looks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketops_applicationset_apps_examined_total",
		Help: "Apps whose head the ApplicationSet refresher read after an event, by whether the fleet changed with it (changed, unchanged, error).",
	}, []string{"outcome"})}
	if cfg.Registry != nil {
		for _, c := range []prometheus.Collector{m.refreshes, m.looks} {
			if err := cfg.Registry.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return &Refresher{cfg: cfg, log: cfg.Logger, metrics: m, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}, nil
}

// Observe says app has a new generation (a notification, the poll). It
// never blocks.
func (r *Refresher) Observe(app string) {
	r.mu.Lock()
	r.dirty[app] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run refreshes the ApplicationSets once at start (what changed while the
// bridge was down), then whenever the fleet's shape changes, until ctx
// ends.
func (r *Refresher) Run(ctx context.Context) {
	pending := r.resync(ctx)
	resync := time.NewTicker(r.cfg.Resync)
	defer resync.Stop()
	attempts := 0
	var retry <-chan time.Time
	for {
		if pending && retry == nil {
			if err := r.refresh(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				attempts++
				delay := min(r.cfg.MinBackoff<<min(attempts-1, 16), r.cfg.MaxBackoff)
				r.log.Warn("applicationset refresh failed; will retry", "attempt", attempts, "retry_in", delay, "error", err)
				retry = time.After(delay)
			} else {
				pending, attempts = false, 0
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-retry:
			retry = nil
		case <-resync.C:
			pending = r.resync(ctx) || pending
		case <-r.wake:
			// Let a burst land, then look at each app it named once.
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.cfg.Coalesce):
			}
			pending = r.look(ctx) || pending
		}
	}
}

func (r *Refresher) refresh(ctx context.Context) error {
	n, err := r.cfg.Sets.Refresh(ctx)
	if err != nil {
		r.metrics.refreshes.WithLabelValues("error").Inc()
		return err
	}
	r.metrics.refreshes.WithLabelValues("ok").Inc()
	r.log.Info("asked the applicationset controller to run the generator again", "applicationsets", n)
	return nil
}

// resync lists every head and reports whether the shape differs from the
// one known (always, the first time).
func (r *Refresher) resync(ctx context.Context) bool {
	heads, err := r.cfg.Releases.List(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("applicationset refresher: list the bucket", "error", err)
		}
		// Unknown: refresh, the generator will say what it can.
		return r.known == nil
	}
	shape := map[string]string{}
	for _, h := range heads {
		if h.Kind != store.KindTombstone {
			shape[h.App] = store.EncodeLabels(h.Labels)
		}
	}
	changed := r.known == nil || !maps.Equal(shape, r.known)
	r.known = shape
	return changed
}

// look reads the head of each app events named, and reports whether any
// appeared, left or changed labels.
func (r *Refresher) look(ctx context.Context) bool {
	r.mu.Lock()
	apps := r.dirty
	r.dirty = map[string]bool{}
	r.mu.Unlock()
	if r.known == nil {
		return r.resync(ctx)
	}
	changed := false
	for app := range apps {
		h, err := r.cfg.Releases.Head(ctx, app)
		live := err == nil && h.Kind != store.KindTombstone
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			if ctx.Err() == nil {
				r.log.Warn("applicationset refresher: read the head", "app", app, "error", err)
			}
			r.metrics.looks.WithLabelValues("error").Inc()
			// Look again at the next event or resync.
			r.mu.Lock()
			r.dirty[app] = true
			r.mu.Unlock()
			continue
		}
		was, known := r.known[app]
		outcome := "changed"
		switch {
		case live && (!known || was != store.EncodeLabels(h.Labels)):
			r.known[app] = store.EncodeLabels(h.Labels)
			r.log.Debug("applicationset refresher: app live", "app", app, "labels", r.known[app], "new", !known)
		case !live && known:
			delete(r.known, app)
			r.log.Debug("applicationset refresher: app gone", "app", app)
		default:
			outcome = "unchanged"
		}
		changed = changed || outcome == "changed"
		r.metrics.looks.WithLabelValues(outcome).Inc()
	}
	return changed
}

// Examined is the counter of apps examined after events with outcome
// (changed, unchanged, error).
func (r *Refresher) Examined(outcome string) prometheus.Counter {
	return r.metrics.looks.WithLabelValues(outcome)
}
