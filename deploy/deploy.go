// Package deploy turns new releases in the bucket into Argo CD refreshes and
// syncs, and tells CI how a release's deploy went.
//
// Events arrive at least once and in any order, from Pub/Sub push, Pub/Sub
// pull or polling; Notify takes them without ever blocking on Argo CD. Per
// app, a burst coalesces into one refresh; a generation at or below one
// already handled is dropped. An Application with automated sync gets a
// sync of its targetRevision (SyncAutomated; trigger.go says why), the
// others a normal refresh: each release is a commit of the bridge's git
// view, so Argo CD resolves the new revision, misses its manifest cache once
// and generates that release once, while a refresh with no new release
// generates nothing. The Applications that
// deploy an app come from an index kept fresh by Argo CD's watch stream, so
// an event costs no listing. Failed Argo CD calls are retried with back-off
// until they succeed or a newer generation replaces them; calls Argo CD
// refuses for good (permission, not found, invalid) fail the generation.
//
// Deploy status is derived from what Argo CD and the bucket hold, so any
// number of bridges answer alike.
package deploy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/cache"
	"github.com/bucketops/bucketops/store"
)

// Releases is what the deployer reads from the bucket: heads, for polling
// and for status.
type Releases interface {
	Head(ctx context.Context, app string) (store.Release, error)
	Stat(ctx context.Context, ref store.Ref) (store.Release, error)
	List(ctx context.Context, prefix string) ([]store.Release, error)
}

// Revisions maps releases to the commits of the git view and back
// (gitview.View).
type Revisions interface {
	Commit(ctx context.Context, app string, generation int64) (string, error)
	Generation(ctx context.Context, app, sha string) (store.Release, error)
}

// Config is the deployer's dependencies and settings.
type Config struct {
	// Connect reaches Argo CD's application service (ArgoCD.Connect). Run
	// calls it, retrying with back-off until it succeeds. Nil means no Argo
	// CD: events are tracked, nothing is refreshed, and Status says so.
	Connect  func() (application.ApplicationServiceClient, io.Closer, error)
	Releases Releases
	// Revisions reads Argo CD's revisions as releases; without it status
	// can't tell which release an Application runs.
	Revisions Revisions
	// Namespace is Argo CD's control-plane namespace, where Applications
	// live unless they say otherwise ("argocd").
	Namespace string
	// Sync starts a sync after the refresh when the Application is out of
	// sync and has no automated sync policy of its own; Prune prunes in it.
	Sync  bool
	Prune bool
	// SyncAutomated asks Argo CD for a sync instead of a refresh of an
	// Application with automated sync (trigger.go says why).
	SyncAutomated bool
	// GenerateFirst, with SyncAutomated, says when Argo CD generates the
	// release (GetManifests at its commit, from Revisions, which it needs)
	// before the sync, so that a comparison running beside the sync's
	// finds it cached (trigger.go): never (the zero value), always, or
	// only for an Application whose last comparison is about to expire
	// (GenerateWhenExpiring, against Reconciliation).
	GenerateFirst GenerateFirst
	// Reconciliation is Argo CD's timeout.reconciliation (argocd-cm; Argo
	// CD's default is 120s): how old an Application's last comparison may
	// be before any write to the Application starts a comparison of its
	// own. Zero is Argo CD's timer turned off, when GenerateWhenExpiring
	// generates first always (trigger.go says why).
	Reconciliation time.Duration
	// Workers bounds concurrent Argo CD calls (default 16). A refresh
	// waits for Argo CD to generate the app's manifests, so this is how
	// many apps of a burst Argo CD works on at once; its application
	// controller compares 20 at once by default (--status-processors).
	Workers int
	// Coalesce is how long a first event waits for more of the same app
	// before its refresh starts (default 100ms).
	Coalesce time.Duration
	// CallTimeout bounds one Argo CD call; a refresh waits for Argo CD to
	// generate manifests (default 2m).
	CallTimeout time.Duration
	// NudgeAfter is how long a sync the bridge started may stay unstarted
	// before a refresh nudges the controller (argo-cd#18500; default 10s).
	NudgeAfter time.Duration
	// MinBackoff and MaxBackoff bound retries of failed Argo CD calls
	// (defaults 1s and 1m).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	Registry               prometheus.Registerer
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Observe, when set, hears of every accepted event's app (the appset
	// refresher); it must not block.
	Observe func(app string)
}

// Deployer refreshes and syncs Argo CD Applications as releases land.
type Deployer struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	index   *index
	now     func() time.Time
	// unknown remembers, for a while, the commits of Applications'
	// histories that name no release of their app (deploys.go).
	unknown *cache.LRU[string, time.Time]

	mu       sync.Mutex
	apps     map[string]*appState
	queue    []string // apps ready to work on, oldest first
	wake     chan struct{}
	running  bool
	baseline bool // the first poll after start was taken

	// connMu guards the Argo CD connection, apart from mu so that a
	// reconnect never holds up event intake.
	connMu sync.Mutex
	argo   application.ApplicationServiceClient // set once Run connected
	closer io.Closer
}

// New returns a Deployer; Run starts it.
func New(cfg Config) (*Deployer, error) {
	if cfg.Releases == nil {
		return nil, errors.New("deploy: no releases store")
	}
	if cfg.GenerateFirst != GenerateNever && cfg.Revisions == nil {
		return nil, errors.New("deploy: GenerateFirst needs Revisions, the git view that names a release's commit")
	}
	if cfg.Logger == nil {
		return nil, errors.New("deploy: no logger")
	}
	if cfg.Registry == nil {
		return nil, errors.New("deploy: no metrics registry")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "argocd"
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.Coalesce == 0 {
		cfg.Coalesce = 100 * time.Millisecond
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.NudgeAfter == 0 {
		cfg.NudgeAfter = 10 * time.Second
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Deployer{
		cfg:   cfg,
		log:   cfg.Logger,
		index: newIndex(cfg.Namespace),
		now:   cfg.Now,
		apps:  map[string]*appState{},
		wake:  make(chan struct{}, cfg.Workers),
	}
	d.unknown = cache.New[string, time.Time](unknownBytes)
	m, err := newMetrics(cfg.Registry, d.pendingApps)
	if err != nil {
		return nil, err
	}
	d.metrics = m
	return d, nil
}

// Enabled reports whether the deployer talks to an Argo CD.
func (d *Deployer) Enabled() bool { return d.cfg.Connect != nil }

// Ready reports whether the deployer has loaded Argo CD's Applications.
func (d *Deployer) Ready() bool { return d.index.isReady() }

// Run keeps the Application index fresh and works the queue until ctx ends.
func (d *Deployer) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("deploy: Run called twice")
	}
	d.running = true
	d.mu.Unlock()
	if d.cfg.Connect == nil {
		<-ctx.Done()
		return nil
	}
	argo, closer, ok := d.connect(ctx)
	if !ok {
		return nil
	}
	d.connMu.Lock()
	d.argo, d.closer = argo, closer
	d.connMu.Unlock()
	defer func() {
		d.connMu.Lock()
		defer d.connMu.Unlock()
		d.closer.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.watch(ctx)
	}()
	for range d.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(ctx)
		}()
	}
	wg.Wait()
	return nil
}
