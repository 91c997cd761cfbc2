// Package deploy turns new releases in the bucket into Argo CD refreshes and
// syncs, and tells CI how a release's deploy went.
//
// Events arrive at least once and in any order, from Pub/Sub push, Pub/Sub
// pull or polling; Notify takes them without ever blocking on Argo CD. Per
// app, a burst coalesces into one refresh; a generation at or below one
// already handled is dropped. A refresh is a normal one: each release is a
// commit of the bridge's git view, so Argo CD resolves the new revision,
// misses its manifest cache once and generates that release once, while a
// refresh with no new release generates nothing. The Applications that
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
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// appState is what the deployer knows of one app.
type appState struct {
	newest    int64     // newest generation any event named
	newestAt  time.Time // when that generation was written
	received  time.Time // when the event naming it arrived
	handled   int64     // newest generation refreshed in every Application
	handledAt time.Time
	queued    bool // in the queue, or waiting for its coalesce window or back-off
	busy      bool // a worker has it
	attempts  int  // failed attempts for newest, for back-off
	lastError string
	// failed is Argo CD's refusal for good of a call for generation
	// failedGen: the generation's status is failed, and it is not retried.
	failed    string
	failedGen int64
	// compareErr is the ComparisonError Argo CD answered the refresh for
	// generation compareGen with: its times have one-second precision, so
	// this is how a failure in the second of the release is told from an
	// older one.
	compareErr string
	compareGen int64
}

// New returns a Deployer; Run starts it.
func New(cfg Config) (*Deployer, error) {
	if cfg.Releases == nil {
		return nil, errors.New("deploy: no releases store")
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

// Notify takes an event. It never blocks on Argo CD: it records the
// generation and, when it is new, schedules the app's refresh. It reports
// whether the event was new; a duplicate, or a generation older than one
// already seen, is dropped.
func (d *Deployer) Notify(ev Event) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.apps[ev.App]
	if st == nil {
		st = &appState{}
		d.apps[ev.App] = st
	}
	if ev.Generation <= st.newest {
		d.metrics.events.WithLabelValues(ev.Source, "duplicate").Inc()
		return false
	}
	d.metrics.events.WithLabelValues(ev.Source, "accepted").Inc()
	st.newest, st.newestAt, st.received = ev.Generation, ev.Time, ev.Received
	if st.received.IsZero() {
		st.received = d.now()
	}
	st.attempts = 0
	if !st.queued && !st.busy {
		st.queued = true
		d.after(d.cfg.Coalesce, ev.App)
	}
	if d.cfg.Observe != nil {
		d.cfg.Observe(ev.App)
	}
	return true
}

// Ignored counts an event that was well-formed but not for us, or that
// couldn't be read (outcome "ignored" or "malformed"), or whose sender
// wasn't authenticated ("rejected").
func (d *Deployer) Ignored(source, outcome string) {
	d.metrics.events.WithLabelValues(source, outcome).Inc()
}

// after puts app on the queue once delay has passed.
func (d *Deployer) after(delay time.Duration, app string) {
	time.AfterFunc(delay, func() {
		d.mu.Lock()
		d.queue = append(d.queue, app)
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	})
}

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

// client is the Argo CD connection in use.
func (d *Deployer) client() application.ApplicationServiceClient {
	d.connMu.Lock()
	defer d.connMu.Unlock()
	return d.argo
}

// reauthenticate reconnects when Argo CD refused old's token: Connect reads
// the token file again, so a rotated token is picked up without a restart.
// Only the first caller for a connection reconnects; the failed call is
// retried with back-off as any other.
func (d *Deployer) reauthenticate(old application.ApplicationServiceClient, err error) {
	if status.Code(err) != codes.Unauthenticated {
		return
	}
	d.connMu.Lock()
	defer d.connMu.Unlock()
	if d.argo != old {
		return
	}
	argo, closer, cerr := d.cfg.Connect()
	if cerr != nil {
		d.metrics.argoErrors.WithLabelValues("connect", status.Code(cerr).String()).Inc()
		d.log.Warn("argo cd refused the token, and reconnecting failed", "error", cerr)
		return
	}
	d.closer.Close() // calls still on the old connection fail and are retried
	d.argo, d.closer = argo, closer
	d.log.Info("argo cd refused the token; reconnected with the token file's current content")
}

// connect calls Connect until it succeeds or ctx ends.
func (d *Deployer) connect(ctx context.Context) (application.ApplicationServiceClient, io.Closer, bool) {
	for attempt := 1; ; attempt++ {
		argo, closer, err := d.cfg.Connect()
		if err == nil {
			return argo, closer, true
		}
		d.metrics.argoErrors.WithLabelValues("connect", status.Code(err).String()).Inc()
		delay := d.backoff(attempt)
		d.log.Warn("can't reach Argo CD; retrying", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, nil, false
		case <-time.After(delay):
		}
	}
}

// work takes apps off the queue and refreshes them.
func (d *Deployer) work(ctx context.Context) {
	for {
		app, ok := d.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
				continue
			}
		}
		d.handle(ctx, app)
		if ctx.Err() != nil {
			return
		}
	}
}

// next pops an app to work on.
func (d *Deployer) next() (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.queue) > 0 {
		app := d.queue[0]
		d.queue = d.queue[1:]
		st := d.apps[app]
		if st.busy || !st.queued {
			continue
		}
		st.queued, st.busy = false, true
		if len(d.queue) > 0 {
			// Let another worker in.
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
		return app, true
	}
	return "", false
}

// handle refreshes (and maybe syncs) app's Applications for its newest
// generation, then schedules what's left: a newer generation that arrived
// meanwhile, or a retry.
func (d *Deployer) handle(ctx context.Context, app string) {
	d.mu.Lock()
	st := d.apps[app]
	gen, at, received := st.newest, st.newestAt, st.received
	d.mu.Unlock()

	err := d.deploy(ctx, app, gen, at, received)

	d.mu.Lock()
	defer d.mu.Unlock()
	st.busy = false
	if err == nil {
		if gen > st.handled {
			st.handled, st.handledAt = gen, d.now()
		}
		st.lastError = ""
		if st.newest > st.handled {
			st.queued = true
			st.attempts = 0
			d.after(d.cfg.Coalesce, app)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	st.lastError = err.Error()
	if permanent(err) {
		// Retrying can't help: the token may not, the Application is gone,
		// or Argo CD calls the request invalid. The generation failed; a
		// newer one is tried afresh.
		st.failed, st.failedGen = "Argo CD refused the bridge's call: "+err.Error(), gen
		d.log.Error("argo cd refused a call for good; not retrying this generation", "app", app, "generation", gen, "error", err)
		if st.newest > gen {
			st.queued, st.attempts = true, 0
			d.after(d.cfg.Coalesce, app)
		}
		return
	}
	if st.newest > gen {
		st.attempts = 0
	}
	st.attempts++
	delay := d.backoff(st.attempts)
	d.log.Warn("argo cd call failed; will retry", "app", app, "generation", st.newest, "attempt", st.attempts, "retry_in", delay, "error", err)
	st.queued = true
	d.after(delay, app)
}

// permanent reports whether Argo CD refused a call for good: every error
// joined in err is PermissionDenied, NotFound or InvalidArgument.
func permanent(err error) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		switch status.Code(unwrapGRPC(e)) {
		case codes.PermissionDenied, codes.NotFound, codes.InvalidArgument:
		default:
			return false
		}
	}
	return len(errs) > 0
}

// unwrapGRPC finds the gRPC status error inside err.
func unwrapGRPC(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := status.FromError(e); ok {
			return e
		}
	}
	return err
}

// failure returns why generation of app failed for good, if it did: a
// refusal of Argo CD this bridge met. (Another replica may have met none.)
func (d *Deployer) failure(app string, generation int64) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil && st.failed != "" && st.failedGen >= generation {
		return st.failed
	}
	return ""
}

// recordComparison keeps what the refresh for gen showed of manifest
// generation: an error, or none.
func (d *Deployer) recordComparison(app string, gen int64, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil && gen >= st.compareGen {
		st.compareErr, st.compareGen = msg, gen
	}
}

// comparisonFailure returns the ComparisonError the refresh for generation
// gen (or a newer one) of app met, if this bridge made it.
func (d *Deployer) comparisonFailure(app string, gen int64) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil && st.compareErr != "" && st.compareGen >= gen {
		return st.compareErr
	}
	return ""
}

// backoff returns the delay before the attempt after n failures: doubling
// from MinBackoff up to MaxBackoff, with jitter.
func (d *Deployer) backoff(n int) time.Duration {
	b := d.cfg.MinBackoff
	for i := 1; i < n && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.cfg.MaxBackoff)
	return b/2 + rand.N(b/2+1)
}

// deploy refreshes every Application of app and syncs those that need it.
// Before the index has loaded, it fails so the app is retried.
func (d *Deployer) deploy(ctx context.Context, app string, gen int64, written, received time.Time) error {
	if !d.index.isReady() {
		return errors.New("the Application index hasn't loaded from Argo CD yet")
	}
	apps := d.index.forApp(app)
	if len(apps) == 0 {
		d.log.Info("no Argo CD Application deploys this app", "app", app, "generation", gen)
		return nil
	}
	var errs []error
	for _, a := range apps {
		if err := d.deployApplication(ctx, app, gen, written, received, a); err != nil {
			errs = append(errs, fmt.Errorf("application %s: %w", d.index.key(a), err))
		}
	}
	return errors.Join(errs...)
}

func (d *Deployer) deployApplication(ctx context.Context, app string, gen int64, written, received time.Time, a *v1alpha1.Application) error {
	name, ns, project := a.Name, d.index.key(a).Namespace, a.Spec.Project
	argo := d.client()
	refreshed, err := d.refresh(ctx, argo, name, ns, project)
	if err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	// Once per refresh that reached Argo CD, not per attempt.
	now := d.now()
	if !received.IsZero() {
		d.metrics.latency.Observe(now.Sub(received).Seconds())
	}
	if !written.IsZero() {
		d.metrics.finalizeLatency.Observe(now.Sub(written).Seconds())
	}
	d.log.Info("refreshed", "app", app, "generation", gen, "application", d.index.key(a).String(), "revision", refreshed.Status.Sync.Revision)
	d.recordComparison(app, gen, comparisonError(refreshed))
	if !d.cfg.Sync {
		return nil
	}
	if p := refreshed.Spec.SyncPolicy; p != nil && p.Automated != nil {
		// Argo CD syncs it itself once the refresh shows it out of sync; a
		// sync of ours would race it.
		return nil
	}
	if refreshed.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced {
		return nil
	}
	prune := d.cfg.Prune
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	requested := time.Now()
	_, err = argo.Sync(cctx, &application.ApplicationSyncRequest{
		Name: &name, AppNamespace: &ns, Project: &project, Prune: &prune,
	})
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("sync", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("sync: an operation is running; retrying after it: %w", err)
		}
		return fmt.Errorf("sync: %w", err)
	}
	d.log.Info("sync started", "app", app, "generation", gen, "application", d.index.key(a).String(), "prune", prune)
	d.nudgeLater(ctx, name, ns, project, requested)
	return nil
}

// refresh asks Argo CD for a normal refresh of one Application and returns
// it as refreshed.
func (d *Deployer) refresh(ctx context.Context, argo application.ApplicationServiceClient, name, ns, project string) (*v1alpha1.Application, error) {
	normal := string(v1alpha1.RefreshTypeNormal)
	q := &application.ApplicationQuery{Name: &name, AppNamespace: &ns, Refresh: &normal}
	if project != "" {
		q.Project = []string{project}
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	a, err := argo.Get(cctx, q)
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("refresh", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		return nil, err
	}
	return a, nil
}

// nudgeLater checks, NudgeAfter after a sync was requested, that Argo CD's
// controller started it. A sync requested just as a refresh completes can
// sit on the Application unstarted until the next reconciliation, minutes
// later (argo-cd#18500); a refresh makes the controller look again.
func (d *Deployer) nudgeLater(ctx context.Context, name, ns, project string, requested time.Time) {
	time.AfterFunc(d.cfg.NudgeAfter, func() {
		if ctx.Err() != nil {
			return
		}
		argo := d.client()
		cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
		defer cancel()
		a, err := argo.Get(cctx, &application.ApplicationQuery{Name: &name, AppNamespace: &ns})
		if err != nil {
			return
		}
		op := a.Status.OperationState
		if a.Operation == nil && op != nil && !op.StartedAt.Time.Before(requested.Truncate(time.Second)) {
			return // started
		}
		d.metrics.nudges.Inc()
		d.log.Info("a requested sync hasn't started; refreshing to nudge Argo CD's controller", "application", ns+"/"+name)
		d.refresh(ctx, argo, name, ns, project)
	})
}

// pendingApps counts apps with a generation not yet handled.
func (d *Deployer) pendingApps() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, st := range d.apps {
		if st.newest > st.handled {
			n++
		}
	}
	return float64(n)
}

// watch keeps the index fresh: a listing, then the watch stream (which
// starts by replaying every Application), again after any error.
func (d *Deployer) watch(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := d.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		delay := d.backoff(attempt + 1)
		d.log.Warn("argo cd application watch ended; reconnecting", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

func (d *Deployer) watchOnce(ctx context.Context) error {
	argo := d.client()
	lctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	list, err := argo.List(lctx, &application.ApplicationQuery{})
	cancel()
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("list", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		return fmt.Errorf("list applications: %w", err)
	}
	d.index.replace(list.Items)
	d.log.Info("application index loaded", "applications", len(list.Items))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := argo.Watch(wctx, &application.ApplicationQuery{})
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("watch", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		return fmt.Errorf("watch applications: %w", err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				d.metrics.argoErrors.WithLabelValues("watch", status.Code(err).String()).Inc()
				d.reauthenticate(argo, err)
			}
			return fmt.Errorf("watch applications: %w", err)
		}
		d.index.apply(ev.Type, &ev.Application)
	}
}

// Handled returns the newest generation of app refreshed in every
// Application that deploys it, and when.
func (d *Deployer) Handled(app string) (int64, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.apps[app]; st != nil {
		return st.handled, st.handledAt
	}
	return 0, time.Time{}
}
