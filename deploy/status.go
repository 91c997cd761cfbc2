package deploy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"

	"github.com/bucketops/bucketops/store"
)

// State is where a generation's deploy stands.
type State string

const (
	// StatePending: no Application has compared the generation (or a newer
	// one) yet.
	StatePending State = "pending"
	// StateProgressing: compared; the sync or the rollout isn't finished.
	StateProgressing State = "progressing"
	// StateDeployed: every Application following the app compared the
	// generation or a newer one and is Synced and Healthy.
	StateDeployed State = "deployed"
	// StateFailed: a sync of it failed, the app went Degraded, Argo CD
	// couldn't generate its manifests, or refused the bridge's calls.
	StateFailed State = "failed"
	// StateSuperseded: a newer generation replaced this one before any
	// Application compared it; it will never be deployed itself. The newer
	// generation's outcome shows in this generation's status once it is
	// compared.
	StateSuperseded State = "superseded"
	// StatePinned: the Application is pinned to another release
	// (targetRevision is that release's commit): it won't deploy this one.
	StatePinned State = "pinned"
)

// Terminal reports whether the state won't change without a new release or
// a change of the Application.
func (s State) Terminal() bool {
	return s == StateDeployed || s == StateFailed || s == StatePinned
}

// ErrNoArgoCD is Status's error when the bridge has no Argo CD to ask.
var ErrNoArgoCD = errors.New("this bridge has no Argo CD configured (--argocd-server), so it can't tell whether a release is deployed")

// ErrIndexLoading is Status's error before the Application index loaded.
var ErrIndexLoading = errors.New("the bridge is still loading Argo CD's Applications; try again in a moment")

// Status is a generation's deploy status, for CI.
type Status struct {
	App        string `json:"app"`
	Generation int64  `json:"generation"`
	State      State  `json:"state"`
	Message    string `json:"message"`
	// Head is the app's newest generation.
	Head         int64               `json:"head"`
	Applications []ApplicationStatus `json:"applications"`
}

// ApplicationStatus is one Application's part in a Status.
type ApplicationStatus struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	State     State  `json:"state"`
	Message   string `json:"message,omitempty"`
	// Revision is the commit Argo CD last compared the Application at (its
	// status.sync.revision), and Compared the release it is.
	Revision string `json:"revision,omitempty"`
	Compared int64  `json:"compared_generation,omitempty"`
	// Live is the release Argo CD last deployed (its History's newest
	// entry): after an Argo CD rollback, an older one than Compared.
	Live   int64  `json:"live_generation,omitempty"`
	Sync   string `json:"sync,omitempty"`
	Health string `json:"health,omitempty"`
	// Operation is the phase of Argo CD's last operation on it.
	Operation string `json:"operation,omitempty"`
}

// Status tells where generation (0: the head) of app stands in Argo CD. It
// is derived from what Argo CD and the bucket hold, never from what this
// bridge did, so every replica answers alike: the commit each Application
// was compared at names a release through the git view.
func (d *Deployer) Status(ctx context.Context, app string, generation int64) (Status, error) {
	if d.cfg.Connect == nil {
		return Status{}, ErrNoArgoCD
	}
	if !d.index.isReady() {
		return Status{}, ErrIndexLoading
	}
	head, err := d.cfg.Releases.Head(ctx, app)
	if err != nil {
		return Status{}, err
	}
	if generation == 0 {
		generation = head.Generation
	}
	if generation > head.Generation {
		return Status{}, fmt.Errorf("%w: %s has no generation %d; its newest is %d", store.ErrNotFound, app, generation, head.Generation)
	}
	rel := head
	if generation != head.Generation {
		if rel, err = d.cfg.Releases.Stat(ctx, store.Ref{App: app, Generation: generation}); err != nil {
			return Status{}, err
		}
	}
	out := Status{App: app, Generation: generation, Head: head.Generation, Applications: []ApplicationStatus{}}
	apps := d.index.forApp(app)
	if len(apps) == 0 {
		out.State = StatePending
		out.Message = fmt.Sprintf("no Argo CD Application deploys %s: create one with plugin %s and the bridge's git view as repoURL (…/git/%s.git)", app, PluginName, app)
		return out, nil
	}
	failure := d.failure(app, generation)
	for _, a := range apps {
		out.Applications = append(out.Applications, d.applicationStatus(ctx, a, app, rel, head.Generation, failure))
	}
	out.State, out.Message = summarize(out.Applications)
	return out, nil
}

var sha1RE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// applicationStatus judges one Application for release rel.
func (d *Deployer) applicationStatus(ctx context.Context, a *v1alpha1.Application, app string, rel store.Release, head int64, failure string) ApplicationStatus {
	k := d.index.key(a)
	st := ApplicationStatus{
		Name: k.Name, Namespace: k.Namespace,
		Sync: string(a.Status.Sync.Status), Health: string(a.Status.Health.Status),
	}
	op := a.Status.OperationState
	if op != nil {
		st.Operation = string(op.Phase)
	}
	gen := rel.Generation
	if failure != "" {
		st.State, st.Message = StateFailed, failure
		return st
	}
	// Pinned to a release by its commit: it follows nothing else.
	if src := bucketopsSource(a); src != nil && sha1RE.MatchString(src.TargetRevision) {
		if pinned, err := d.generationOf(ctx, app, src.TargetRevision); err == nil && pinned.Generation != gen {
			st.State = StatePinned
			st.Message = fmt.Sprintf("pinned to generation %d (targetRevision %.12s); set targetRevision: main to follow new releases", pinned.Generation, src.TargetRevision)
			return st
		}
	}
	if h := a.Status.History; len(h) > 0 && h[len(h)-1].Revision != "" {
		if r, err := d.generationOf(ctx, app, h[len(h)-1].Revision); err == nil {
			st.Live = r.Generation
		}
	}
	if st.Live == gen && a.Status.Health.Status == health.HealthStatusHealthy && (op == nil || op.Phase == synccommon.OperationSucceeded) {
		// What Argo CD deployed last, whatever it compares now (a rollback
		// in Argo CD deploys an older release than main's).
		st.State = StateDeployed
		st.Message = fmt.Sprintf("live: Argo CD deployed generation %d last, and it is Healthy", gen)
		st.Revision = revisionOf(a)
		return st
	}
	st.Revision = revisionOf(a)
	compared := int64(0)
	if st.Revision != "" {
		if r, err := d.generationOf(ctx, app, st.Revision); err == nil {
			compared = r.Generation
			st.Compared = compared
		}
	}
	if compared < gen {
		// Argo CD tried after the release existed, and couldn't: it says so
		// (its times have whole seconds: a reconciliation in the release's
		// second may predate it), or this bridge's refresh for it was
		// answered so.
		msg := comparisonError(a)
		after := a.Status.ReconciledAt != nil && a.Status.ReconciledAt.Time.After(rel.Time)
		if local := d.comparisonFailure(app, gen); local != "" && msg != "" {
			after = true
		}
		if msg != "" && after {
			st.State = StateFailed
			st.Message = "Argo CD can't generate the manifests: " + msg
			return st
		}
		if head > gen {
			st.State = StateSuperseded
			st.Message = fmt.Sprintf("generation %d replaced %d before Argo CD compared it", head, gen)
			return st
		}
		st.State = StatePending
		st.Message = "Argo CD hasn't compared this generation yet"
		if compared > 0 {
			st.Message += fmt.Sprintf(" (it is at %d)", compared)
		}
		return st
	}
	synced := int64(0)
	if op != nil && op.SyncResult != nil && op.SyncResult.Revision != "" {
		if r, err := d.generationOf(ctx, app, op.SyncResult.Revision); err == nil {
			synced = r.Generation
		}
	}
	switch {
	case op != nil && (op.Phase == synccommon.OperationFailed || op.Phase == synccommon.OperationError) && (synced >= gen || synced == 0):
		st.State = StateFailed
		st.Message = "sync failed: " + op.Message
	case a.Status.Health.Status == health.HealthStatusDegraded:
		st.State = StateFailed
		st.Message = "Degraded"
		if m := a.Status.Health.Message; m != "" {
			st.Message += ": " + m
		}
	case op != nil && op.Phase == synccommon.OperationRunning:
		st.State = StateProgressing
		st.Message = "sync running: " + op.Message
	case a.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced && a.Status.Health.Status == health.HealthStatusHealthy:
		st.State = StateDeployed
		st.Message = fmt.Sprintf("Synced and Healthy at generation %d", compared)
	default:
		st.State = StateProgressing
		st.Message = fmt.Sprintf("compared at generation %d; %s, %s", compared, orUnknown(st.Sync), orUnknown(st.Health))
		if st.Live != 0 && st.Live < gen {
			st.Message += fmt.Sprintf("; generation %d is live (rolled back in Argo CD?)", st.Live)
		}
	}
	return st
}

// generationOf names the release a commit of app's git view is.
func (d *Deployer) generationOf(ctx context.Context, app, sha string) (store.Release, error) {
	if d.cfg.Revisions == nil {
		return store.Release{}, errors.New("no git view")
	}
	return d.cfg.Revisions.Generation(ctx, app, sha)
}

// revisionOf is the commit Argo CD last compared the Application's bucketops
// source at.
func revisionOf(a *v1alpha1.Application) string {
	if a.Spec.Source != nil {
		return a.Status.Sync.Revision
	}
	for i, s := range a.Spec.Sources {
		if isBucketops(s.Plugin) && i < len(a.Status.Sync.Revisions) {
			return a.Status.Sync.Revisions[i]
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// comparisonError returns the message of a ComparisonError condition.
func comparisonError(a *v1alpha1.Application) string {
	for _, c := range a.Status.Conditions {
		if c.Type == v1alpha1.ApplicationConditionComparisonError {
			return c.Message
		}
	}
	return ""
}

// summarize folds the Applications' states: any failure fails; all
// deployed is deployed; otherwise the least advanced state wins. Pinned
// Applications don't count while another follows the app.
func summarize(apps []ApplicationStatus) (State, string) {
	var msgs []string
	count := map[State]int{}
	for _, a := range apps {
		count[a.State]++
		msgs = append(msgs, a.Namespace+"/"+a.Name+": "+a.Message)
	}
	sort.Strings(msgs)
	msg := strings.Join(msgs, "; ")
	following := len(apps) - count[StatePinned]
	switch {
	case count[StateFailed] > 0:
		return StateFailed, msg
	case following == 0:
		return StatePinned, msg
	case count[StateDeployed] == following:
		return StateDeployed, msg
	case count[StatePending] > 0:
		return StatePending, msg
	case count[StateSuperseded] > 0:
		return StateSuperseded, msg
	default:
		return StateProgressing, msg
	}
}
