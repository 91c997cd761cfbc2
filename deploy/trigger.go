package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bucketops/bucketops/store"
)

// What a release asks of Argo CD, per Application: a sync for one that
// syncs automatically (SyncAutomated), a refresh for the others, then a
// sync if the bridge syncs them (Sync).
//
// Why a sync rather than a refresh for an automated Application: a refresh
// is an annotation argocd-server sets and the controller clears, and every
// annotation change of an Application makes the ApplicationSet controller
// render its whole ApplicationSet again (twice per refresh); the refresh's
// comparison is then followed by the automated sync's own. A sync request
// changes no annotation and goes straight to the one comparison the sync
// makes. Argo CD refuses a sync to an explicit revision on an automated
// Application, so the sync names none: argocd-server resolves the
// Application's own targetRevision with a fresh ls-remote of the git view,
// whose branch is already at the release. Whether it landed there is
// checked once the operation finishes; when it didn't (or the operation
// never started), a refresh follows, as without SyncAutomated.

// errNoApplication: no Application deploys the app. Not a failure: the
// release waits for one (adopt).
var errNoApplication = errors.New("no Argo CD Application deploys this app")

// deploy asks Argo CD to take generation gen of app in every Application
// that deploys it. Before the index has loaded, it fails so the app is
// retried.
func (d *Deployer) deploy(ctx context.Context, app string, gen int64, written, received time.Time) error {
	if !d.index.isReady() {
		return errors.New("the Application index hasn't loaded from Argo CD yet")
	}
	apps := d.index.forApp(app)
	if len(apps) == 0 {
		d.log.Info("no Argo CD Application deploys this app", "app", app, "generation", gen)
		return errNoApplication
	}
	// A tombstone renders as nothing. A sync request of ours would prune
	// every resource of the app, where Argo CD's automated sync refuses an
	// empty sync (allowEmpty off) and an ApplicationSet deletes the
	// Application under its own preserveResourcesOnDeletion: a retire
	// gets a refresh, and Argo CD's policies decide.
	syncFirst := d.cfg.SyncAutomated && slices.ContainsFunc(apps, automated) && !d.tombstone(ctx, app, gen)
	var errs []error
	for _, a := range apps {
		var err error
		if syncFirst && automated(a) {
			err = d.syncAutomated(ctx, app, gen, written, received, a)
		} else {
			err = d.refreshApplication(ctx, app, gen, written, received, a)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("application %s: %w", d.index.key(a), err))
		}
	}
	return errors.Join(errs...)
}

// tombstone reports whether generation gen of app is a tombstone, or
// might be: a release that can't be read is treated as one, so that only
// a release known to hold objects is ever synced by the bridge.
func (d *Deployer) tombstone(ctx context.Context, app string, gen int64) bool {
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	rel, err := d.cfg.Releases.Stat(cctx, store.Ref{App: app, Generation: gen})
	if err != nil {
		d.log.Warn("can't tell whether the release is a tombstone: refreshing instead of syncing", "app", app, "generation", gen, "error", err)
		return true
	}
	return rel.Kind == store.KindTombstone
}

// automated reports whether Argo CD syncs a itself. Argo CD 3.x can also
// turn automated sync off with automated.enabled: false, a field the v2
// client drops: such an Application looks automated here (docs/argocd.md
// says to remove automated instead, or to run without --sync-automated).
func automated(a *v1alpha1.Application) bool {
	p := a.Spec.SyncPolicy
	return p != nil && p.Automated != nil
}

// observe records how long the release took to reach Argo CD, once per
// call that reached it.
func (d *Deployer) observe(written, received time.Time) {
	now := d.now()
	if !received.IsZero() {
		d.metrics.latency.Observe(now.Sub(received).Seconds())
	}
	if !written.IsZero() {
		d.metrics.finalizeLatency.Observe(now.Sub(written).Seconds())
	}
}

// refreshApplication refreshes a, then syncs it when the bridge syncs
// Applications without automated sync and a is out of sync.
func (d *Deployer) refreshApplication(ctx context.Context, app string, gen int64, written, received time.Time, a *v1alpha1.Application) error {
	name, ns, project := a.Name, d.index.key(a).Namespace, a.Spec.Project
	argo := d.client()
	d.metrics.triggers.WithLabelValues("refresh").Inc()
	refreshed, err := d.refresh(ctx, argo, name, ns, project)
	if err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	d.observe(written, received)
	d.log.Info("refreshed", "app", app, "generation", gen, "application", d.index.key(a).String(), "revision", refreshed.Status.Sync.Revision)
	d.recordComparison(app, gen, comparisonError(refreshed))
	if !d.cfg.Sync {
		return nil
	}
	if automated(refreshed) {
		// Argo CD syncs it itself once the refresh shows it out of sync; a
		// sync of ours would race it.
		return nil
	}
	if refreshed.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced {
		return nil
	}
	requested := time.Now()
	if err := d.sync(ctx, argo, name, ns, project, d.cfg.Prune, nil); err != nil {
		return err
	}
	d.log.Info("sync started", "app", app, "generation", gen, "application", d.index.key(a).String(), "prune", d.cfg.Prune)
	d.nudgeLater(ctx, name, ns, project, requested)
	return nil
}

// syncAutomated asks Argo CD to sync a, which syncs automatically, to its
// own targetRevision, pruning as its automated policy says, and checks
// afterwards that the sync landed on generation gen or a newer one.
func (d *Deployer) syncAutomated(ctx context.Context, app string, gen int64, written, received time.Time, a *v1alpha1.Application) error {
	k, project := d.index.key(a), a.Spec.Project
	prune := a.Spec.SyncPolicy.Automated.Prune
	if d.shouldGenerateFirst(a) {
		d.generateFirst(ctx, app, gen, k, project)
	} else if d.cfg.GenerateFirst == GenerateWhenExpiring {
		d.log.Debug("not generating first: the application's last comparison isn't expiring", "app", app, "generation", gen, "application", k.String(), "compared_ago", d.now().Sub(a.Status.ReconciledAt.Time).Round(time.Second))
	}
	requested := time.Now()
	d.metrics.triggers.WithLabelValues("sync").Inc()
	if err := d.sync(ctx, d.client(), k.Name, k.Namespace, project, prune, automatedRetry(a)); err != nil {
		return err
	}
	d.observe(written, received)
	d.log.Info("sync started", "app", app, "generation", gen, "application", k.String(), "prune", prune)
	d.confirmLater(ctx, app, gen, k, project, requested)
	return nil
}

// generateFirst asks argocd-server for a's manifests at the commit of
// generation gen, before the sync is requested, so that the repo-server
// generates the release once and caches it. Without it a release can be
// generated twice at once: the sync's write to the Application makes the
// controller look at it, and one last compared longer ago than
// timeout.reconciliation gets a comparison of its own ("comparison
// expired") beside the sync's; both miss the manifest cache, and the
// repo-server lets any number of generations of one revision of a plugin
// source run together. argocd-server asks the repo-server with what the
// controller sends (the cluster's version and API list, the app's name,
// namespace and tracking), so its generation is cached under the key
// both comparisons read. The bridge drops the answer (argocd-server
// hides Secrets' data in it). A failure is logged and counted, and the
// sync goes ahead: its comparison generates again and reports what
// failed in the Application's conditions.
func (d *Deployer) generateFirst(ctx context.Context, app string, gen int64, k appKey, project string) {
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	sha, err := d.cfg.Revisions.Commit(cctx, app, gen)
	if err != nil {
		d.log.Warn("no commit for the release; syncing without generating first", "app", app, "generation", gen, "application", k.String(), "error", err)
		return
	}
	argo := d.client()
	d.metrics.triggers.WithLabelValues("generate").Inc()
	if _, err := argo.GetManifests(cctx, &application.ApplicationManifestQuery{Name: &k.Name, AppNamespace: &k.Namespace, Project: &project, Revision: &sha}); err != nil {
		d.metrics.argoErrors.WithLabelValues("get_manifests", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		d.log.Warn("argo cd couldn't generate the release before its sync; syncing anyway", "app", app, "generation", gen, "application", k.String(), "error", err)
	}
}

// GenerateFirst says when the bridge has Argo CD generate a release
// before it syncs an automated Application (Config.GenerateFirst).
type GenerateFirst int

const (
	// GenerateNever syncs at once.
	GenerateNever GenerateFirst = iota
	// GenerateWhenExpiring generates first only for an Application whose
	// last comparison is unknown or older than Config.Reconciliation less
	// expiryMargin: the only ones whose sync can meet a comparison of the
	// controller's own. Argo CD's application controller compares an
	// Application on any change to it once its status.reconciledAt is
	// older than timeout.reconciliation ("comparison expired",
	// needRefreshAppStatus and comparisonExpiry in controller/
	// appcontroller.go, no jitter); the sync's write is such a change. One
	// compared more recently meets no comparison but the sync's own, and
	// asking for its manifests first would only cost argocd-server the
	// call (with its discovery calls to the API server) and delay the
	// sync by a generation.
	GenerateWhenExpiring
	// GenerateAlways generates first for every release.
	GenerateAlways
)

// expiryMargin is how much sooner than timeout.reconciliation the bridge
// counts a comparison as expiring: the time from the bridge reading the
// Application to the end of the sync's generation, during which every
// write to the Application (the sync's request, then the controller's
// own operation state) can start the expired comparison; a few seconds
// on an idle controller, and the two clocks' skew. A controller behind
// on its queue takes the writes in later, when more comparisons have
// expired, but then its refresh and operation queues rarely reach one
// Application at once (the fleet race's bursts without generate-first:
// 0 to 8 second generations for 200 apps). With
// timeout.hard.reconciliation set, an expired hard comparison skips the
// cache, and nothing the bridge asks first can spare it.
const expiryMargin = 10 * time.Second

var generateFirstNames = map[GenerateFirst]string{GenerateNever: "never", GenerateWhenExpiring: "expiring", GenerateAlways: "always"}

// String is the name --generate-first takes.
func (g GenerateFirst) String() string { return generateFirstNames[g] }

// MarshalText and UnmarshalText make GenerateFirst a flag (flag.TextVar).
func (g GenerateFirst) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText reads never, expiring or always; a boolean (true,
// false, 1, 0, …: what the flag took when it was a switch) is always or
// never.
func (g *GenerateFirst) UnmarshalText(b []byte) error {
	v := string(b)
	for k, name := range generateFirstNames {
		if name == v {
			*g = k
			return nil
		}
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q: want expiring, always or never", v)
	}
	*g = map[bool]GenerateFirst{true: GenerateAlways, false: GenerateNever}[on]
	return nil
}

// shouldGenerateFirst says whether a's sync should wait for Argo CD to
// generate the release first (GenerateFirst).
func (d *Deployer) shouldGenerateFirst(a *v1alpha1.Application) bool {
	switch d.cfg.GenerateFirst {
	case GenerateAlways:
		return true
	case GenerateWhenExpiring:
		at := a.Status.ReconciledAt
		if at == nil {
			return true // never compared: Argo CD counts that as expired
		}
		if d.cfg.Reconciliation <= 0 {
			// Argo CD's timer off: before 3.5.1 every comparison then
			// counts as expired (argo-cd#27683), after it none does; one
			// spare call is the cheaper mistake.
			return true
		}
		return d.now().Sub(at.Time) >= d.cfg.Reconciliation-expiryMargin
	}
	return false
}

// automatedSyncRetries is how often Argo CD's automated sync retries a
// sync that failed when the Application sets no retry of its own
// (controller/appcontroller.go, autoSync: RetryStrategy{Limit: 5}, with
// the default backoff).
const automatedSyncRetries = 5

// automatedRetry is the retry a sync of ours must carry to stand in for
// the automated sync of a: none when a sets its own, which argocd-server
// applies to every sync; else the automated sync's default. A sync
// without one that fails, once, at a revision leaves the Application
// there: Argo CD's automated sync never retries a revision whose last
// sync failed ("Skipping auto-sync: failed previous sync attempt"), so
// the release would wait for the next one.
func automatedRetry(a *v1alpha1.Application) *v1alpha1.RetryStrategy {
	if a.Spec.SyncPolicy != nil && a.Spec.SyncPolicy.Retry != nil {
		return nil
	}
	return &v1alpha1.RetryStrategy{Limit: automatedSyncRetries}
}

// sync asks Argo CD to sync one Application to its targetRevision; retry,
// when set, replaces the Application's own retry strategy.
func (d *Deployer) sync(ctx context.Context, argo application.ApplicationServiceClient, name, ns, project string, prune bool, retry *v1alpha1.RetryStrategy) error {
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	_, err := argo.Sync(cctx, &application.ApplicationSyncRequest{
		Name: &name, AppNamespace: &ns, Project: &project, Prune: &prune, RetryStrategy: retry,
	})
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("sync", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("sync: an operation is running; retrying after it: %w", err)
		}
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

// confirmInterval is how often confirmLater looks at the index.
const confirmInterval = 250 * time.Millisecond

// confirmLater follows, in the index the watch stream keeps, the sync
// requested at requested until it finishes. It landed when Argo CD synced
// generation gen or a newer one; otherwise (it failed, it synced an older
// revision, or it never started within NudgeAfter, argo-cd#18500) a normal
// refresh follows, which shows the failure in the Application's
// conditions and lets Argo CD's automated sync take a release it hasn't
// tried. One whose sync failed, retries included (automatedRetry), waits
// for the next release, as after a failed automated sync of Argo CD's.
func (d *Deployer) confirmLater(ctx context.Context, app string, gen int64, k appKey, project string, requested time.Time) {
	since := requested.Truncate(time.Second) // Argo CD's times have whole seconds
	var check func()
	check = func() {
		if ctx.Err() != nil {
			return
		}
		a := d.index.get(k)
		if a == nil {
			return // deleted meanwhile
		}
		op := a.Status.OperationState
		started := op != nil && !op.StartedAt.Time.Before(since)
		switch {
		case started && op.Phase.Completed():
			landed := int64(0)
			if op.SyncResult != nil && op.SyncResult.Revision != "" {
				if r, err := d.generationOf(ctx, app, op.SyncResult.Revision); err == nil {
					landed = r.Generation
				}
			}
			if op.Phase == synccommon.OperationSucceeded && landed >= gen {
				return
			}
			reason := fmt.Sprintf("the sync ended %s at generation %d", op.Phase, landed)
			if op.Phase != synccommon.OperationSucceeded {
				reason = fmt.Sprintf("the sync ended %s: %s", op.Phase, op.Message)
			}
			d.fallBack(ctx, app, gen, k, project, reason)
			return
		case !started && time.Since(requested) >= d.cfg.NudgeAfter:
			d.metrics.nudges.Inc()
			d.fallBack(ctx, app, gen, k, project, "the sync hasn't started")
			return
		case time.Since(requested) >= d.cfg.CallTimeout:
			return // still running: Argo CD reports the outcome
		}
		time.AfterFunc(confirmInterval, check)
	}
	time.AfterFunc(confirmInterval, check)
}

// fallBack refreshes an automated Application a sync of gen didn't
// deploy.
func (d *Deployer) fallBack(ctx context.Context, app string, gen int64, k appKey, project, reason string) {
	d.metrics.triggers.WithLabelValues("fallback_refresh").Inc()
	d.log.Info("a sync didn't deploy the release; refreshing", "app", app, "generation", gen, "application", k.String(), "reason", reason)
	refreshed, err := d.refresh(ctx, d.client(), k.Name, k.Namespace, project)
	if err != nil {
		d.log.Warn("refresh after a sync failed; Argo CD's own polling is the safety net", "app", app, "generation", gen, "application", k.String(), "error", err)
		return
	}
	d.recordComparison(app, gen, comparisonError(refreshed))
}
