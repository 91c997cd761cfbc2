package deploy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/store"
)

// State is where a generation's deploy stands.
type State string

const (
	// StatePending: no Application has fetched the generation (or a newer
	// one) yet.
	StatePending State = "pending"
	// StateProgressing: fetched; the sync or the rollout isn't finished.
	StateProgressing State = "progressing"
	// StateDeployed: every Application fetched the generation or a newer
	// one, compared or synced after that, and is Synced and Healthy.
	StateDeployed State = "deployed"
	// StateFailed: a sync after the fetch failed, the app went Degraded, or
	// Argo CD couldn't generate its manifests.
	StateFailed State = "failed"
	// StateSuperseded: a newer generation replaced this one before any
	// Application fetched it; it will never be deployed itself. The newer
	// generation's outcome shows in this generation's status once it is
	// fetched.
	StateSuperseded State = "superseded"
)

// Terminal reports whether the state won't change without a new release.
func (s State) Terminal() bool { return s == StateDeployed || s == StateFailed }

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
	// Served is the newest generation the bridge served this Application,
	// and when.
	Served   int64      `json:"served_generation,omitempty"`
	ServedAt *time.Time `json:"served_at,omitempty"`
	Sync     string     `json:"sync,omitempty"`
	Health   string     `json:"health,omitempty"`
	// Operation is the phase of Argo CD's last operation on it.
	Operation string `json:"operation,omitempty"`
}

// servedKey is an app as fetched by one Argo CD Application instance.
type servedKey struct{ instance, app string }

type served struct {
	generation int64
	at         time.Time
}

// Served records that the bridge served app's generation to the Argo CD
// Application whose instance name is instance (ARGOCD_APP_NAME: "name" in
// Argo CD's own namespace, "namespace_name" elsewhere). Only the newest
// generation is kept.
func (d *Deployer) Served(app, instance string, generation int64) {
	if instance == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := servedKey{instance: instance, app: app}
	if s, ok := d.served[k]; ok && s.generation > generation {
		return
	}
	d.served[k] = served{generation: generation, at: d.now()}
}

// servedTo returns what was served for app to the Application a.
func (d *Deployer) servedTo(app string, a *v1alpha1.Application) (served, bool) {
	k := d.index.key(a)
	instance := k.Name
	if k.Namespace != d.cfg.Namespace {
		instance = k.Namespace + "_" + k.Name
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.served[servedKey{instance: instance, app: app}]
	return s, ok
}

// Status tells where generation (0: the head) of app stands in Argo CD.
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
	d.mu.Lock()
	handled := int64(0)
	if st := d.apps[app]; st != nil {
		handled = st.handled
	}
	d.mu.Unlock()

	out := Status{App: app, Generation: generation, Head: head.Generation, Applications: []ApplicationStatus{}}
	apps := d.index.forApp(app)
	if len(apps) == 0 {
		out.State = StatePending
		out.Message = fmt.Sprintf("no Argo CD Application deploys %s: create one with plugin %s and parameter app=%s", app, PluginName, app)
		return out, nil
	}
	for _, a := range apps {
		s, _ := d.servedTo(app, a)
		out.Applications = append(out.Applications, d.applicationStatus(a, s, generation, head.Generation, handled))
	}
	out.State, out.Message = summarize(out.Applications)
	return out, nil
}

// applicationStatus judges one Application. Argo CD's times have second
// precision, so "after serving" compares with the serving second.
func (d *Deployer) applicationStatus(a *v1alpha1.Application, s served, gen, head, handled int64) ApplicationStatus {
	k := d.index.key(a)
	st := ApplicationStatus{
		Name: k.Name, Namespace: k.Namespace,
		Sync: string(a.Status.Sync.Status), Health: string(a.Status.Health.Status),
	}
	op := a.Status.OperationState
	if op != nil {
		st.Operation = string(op.Phase)
	}
	if s.generation > 0 {
		st.Served = s.generation
		at := s.at
		st.ServedAt = &at
	}
	if s.generation < gen {
		switch {
		case head > gen:
			st.State = StateSuperseded
			st.Message = fmt.Sprintf("generation %d replaced %d before Argo CD fetched it", head, gen)
		case handled >= gen && comparisonError(a) != "":
			st.State = StateFailed
			st.Message = "Argo CD can't generate the manifests: " + comparisonError(a)
		default:
			st.State = StatePending
			st.Message = "Argo CD hasn't fetched this generation yet"
		}
		return st
	}
	since := s.at.Truncate(time.Second)
	after := func(t *metav1.Time) bool { return t != nil && !t.Time.Before(since) }
	switch {
	case op != nil && (op.Phase == synccommon.OperationFailed || op.Phase == synccommon.OperationError) && after(op.FinishedAt):
		st.State = StateFailed
		st.Message = "sync failed: " + op.Message
	case a.Status.Health.Status == health.HealthStatusDegraded && after(a.Status.ReconciledAt):
		st.State = StateFailed
		st.Message = "Degraded"
		if m := a.Status.Health.Message; m != "" {
			st.Message += ": " + m
		}
	case op != nil && op.Phase == synccommon.OperationRunning:
		st.State = StateProgressing
		st.Message = "sync running: " + op.Message
	case a.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced && a.Status.Health.Status == health.HealthStatusHealthy &&
		(after(a.Status.ReconciledAt) || (op != nil && after(op.FinishedAt))):
		st.State = StateDeployed
		st.Message = fmt.Sprintf("Synced and Healthy with generation %d", s.generation)
	default:
		st.State = StateProgressing
		st.Message = fmt.Sprintf("fetched generation %d; %s, %s", s.generation, orUnknown(st.Sync), orUnknown(st.Health))
	}
	return st
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
// deployed is deployed; otherwise the least advanced state wins.
func summarize(apps []ApplicationStatus) (State, string) {
	var msgs []string
	count := map[State]int{}
	for _, a := range apps {
		count[a.State]++
		msgs = append(msgs, a.Namespace+"/"+a.Name+": "+a.Message)
	}
	sort.Strings(msgs)
	msg := strings.Join(msgs, "; ")
	switch {
	case count[StateFailed] > 0:
		return StateFailed, msg
	case count[StateDeployed] == len(apps):
		return StateDeployed, msg
	case count[StatePending] > 0:
		return StatePending, msg
	case count[StateSuperseded] > 0:
		return StateSuperseded, msg
	default:
		return StateProgressing, msg
	}
}
