package deploy_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// automatedApp is viewApp with automated sync, pruning.
func automatedApp(name, app, url string) *v1alpha1.Application {
	a := viewApp(name, app, url)
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{Prune: true}}
	return a
}

// waitCalls waits until the fake has answered n calls of method for the
// Application name.
func waitCalls(t *testing.T, argo *argocdtest.Server, method, name string, n int) []argocdtest.Call {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []argocdtest.Call
		for _, c := range argo.Calls() {
			if c.Method == method && c.Name == name {
				got = append(got, c)
			}
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s calls, want %d", name, len(got), method, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An Application that syncs automatically gets a sync of its own
// targetRevision, which Argo CD resolves to the release's commit, and no
// refresh: no refresh annotation flips (each of which re-renders an
// ApplicationSet) and one comparison fewer. The others are refreshed as
// before.
func TestAutomatedApplicationsAreSyncedNotRefreshed(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	argo.Put(automatedApp("auto", "prod/payments", url("prod/payments")))
	argo.Put(viewApp("manual", "prod/manual", url("prod/manual")))
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions, c.SyncAutomated = view, true })

	auto, manual := publish(t, st, "prod/payments", "one"), publish(t, st, "prod/manual", "one")
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: auto, Source: deploy.SourcePush})
	r.deployer.Notify(deploy.Event{App: "prod/manual", Generation: manual, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", auto)
	waitHandled(t, r.deployer, "prod/manual", manual)

	sha, err := view.Commit(context.Background(), "prod/payments", auto)
	if err != nil {
		t.Fatal(err)
	}
	syncs := waitCalls(t, argo, "sync", "auto", 1)
	if len(syncs) != 1 || syncs[0].Revision != sha || !syncs[0].Prune {
		t.Errorf("syncs of auto: %+v; want one, pruning as its automated policy says, landing on %s", syncs, sha)
	}
	waitCalls(t, argo, "refresh", "manual", 1)
	// The sync landed: what Argo CD reports is the release, deployed.
	waitState(t, r.deployer, auto, deploy.StateDeployed)
	if n := len(argo.Syncs()); n != 1 {
		t.Errorf("%d syncs; the manual Application must not be synced without --sync", n)
	}
	for _, c := range argo.Refreshes() {
		if c.Name == "auto" {
			t.Errorf("the automated Application was refreshed after a sync that landed: %+v", c)
		}
	}
}

// A sync that doesn't deploy the release, because it ended on an older
// revision, failed, or never started, is followed by a refresh, as without
// sync-first: Argo CD then shows the failure in the Application's
// conditions and its automated sync takes the release.
func TestASyncThatDidNotDeployTheReleaseIsFollowedByARefresh(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onSync func(old string) func(*v1alpha1.Application, *application.ApplicationSyncRequest) error
	}{
		{
			name: "it landed on an older revision",
			onSync: func(old string) func(*v1alpha1.Application, *application.ApplicationSyncRequest) error {
				return func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
					finished(a, synccommon.OperationSucceeded, old, "successfully synced")
					return nil
				}
			},
		},
		{
			name: "it failed to generate the manifests",
			onSync: func(string) func(*v1alpha1.Application, *application.ApplicationSyncRequest) error {
				return func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
					finished(a, synccommon.OperationError, "", "ComparisonError: bucketops: refused")
					return nil
				}
			},
		},
		{
			name: "it never started",
			onSync: func(string) func(*v1alpha1.Application, *application.ApplicationSyncRequest) error {
				return func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
					a.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{}}
					return nil
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argo := argocdtest.New(t)
			st := storetest.New(t, true).Store(t, "")
			view, url := gitView(t, argo, st)
			first := publish(t, st, "prod/payments", "one")
			old, err := view.Commit(context.Background(), "prod/payments", first)
			if err != nil {
				t.Fatal(err)
			}
			argo.Put(automatedApp("auto", "prod/payments", url("prod/payments")))
			argo.OnSync(tc.onSync(old))
			r := newRig(t, argo, st, func(c *deploy.Config) {
				c.Revisions, c.SyncAutomated, c.NudgeAfter = view, true, 300*time.Millisecond
			})
			gen := publish(t, st, "prod/payments", "two")
			r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen, Source: deploy.SourcePush})
			waitCalls(t, argo, "sync", "auto", 1)
			refreshes := waitCalls(t, argo, "refresh", "auto", 1)
			sha, err := view.Commit(context.Background(), "prod/payments", gen)
			if err != nil {
				t.Fatal(err)
			}
			if refreshes[0].Revision != sha {
				t.Errorf("the refresh resolved %s, want the release's commit %s", refreshes[0].Revision, sha)
			}
		})
	}
}

// A sync of the bridge's stands in for Argo CD's automated sync, so it is
// retried as that one would be: 5 times unless the Application sets its own
// retry, which argocd-server then applies. Without a retry, one failed
// attempt at the release's revision left the Application there: the
// automated sync never retries a revision whose last sync failed.
func TestASyncOfTheBridgesIsRetriedAsAutomatedSyncWouldBe(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	argo.Put(automatedApp("auto", "prod/payments", url("prod/payments")))
	own := automatedApp("own", "prod/orders", url("prod/orders"))
	own.Spec.SyncPolicy.Retry = &v1alpha1.RetryStrategy{Limit: 2}
	argo.Put(own)
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions, c.SyncAutomated = view, true })
	for _, app := range []string{"prod/payments", "prod/orders"} {
		gen := publish(t, st, app, "one")
		r.deployer.Notify(deploy.Event{App: app, Generation: gen, Source: deploy.SourcePush})
	}
	for name, want := range map[string]int64{"auto": 5, "own": 2} {
		if syncs := waitCalls(t, argo, "sync", name, 1); syncs[0].Retries != want {
			t.Errorf("the sync of %s is retried %d times, want %d", name, syncs[0].Retries, want)
		}
	}
}

// finished sets a's operation as ended in phase at revision.
func finished(a *v1alpha1.Application, phase synccommon.OperationPhase, revision, msg string) {
	now := metav1.Now()
	a.Status.OperationState = &v1alpha1.OperationState{
		Operation:  v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: revision}},
		Phase:      phase,
		Message:    msg,
		StartedAt:  now,
		FinishedAt: &now,
		SyncResult: &v1alpha1.SyncOperationResult{Revision: revision},
	}
}

// Retiring an app publishes a tombstone, which renders as nothing: a sync
// request would prune every resource of the app, bypassing what keeps them
// (automated sync refuses an empty sync with allowEmpty off; an
// ApplicationSet deletes the Application under preserveResourcesOnDeletion).
// A tombstone gets a refresh, never a sync of the bridge's.
func TestATombstoneIsRefreshedNeverSynced(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	argo.Put(automatedApp("auto", "prod/payments", url("prod/payments")))
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions, c.SyncAutomated = view, true })

	first := publish(t, st, "prod/payments", "one")
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: first, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", first)
	waitCalls(t, argo, "sync", "auto", 1)

	res, err := st.Retire(context.Background(), "prod/payments", store.Publication{})
	if err != nil {
		t.Fatal(err)
	}
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: res.Generation, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", res.Generation)
	waitCalls(t, argo, "refresh", "auto", 1)
	if syncs := argo.Syncs(); len(syncs) != 1 {
		t.Errorf("%d syncs, want only the first release's: a sync of the tombstone prunes the app's resources: %+v", len(syncs), syncs)
	}
}

// With GenerateFirst, the bridge asks Argo CD for an automated
// Application's manifests at the release's commit before it syncs, so the
// repo-server generates the release before any comparison needs it; when
// Argo CD can't answer, the sync still goes ahead. GenerateWhenExpiring
// asks only where Argo CD's controller would compare the Application on
// the sync's write: never compared, or last compared about
// timeout.reconciliation ago.
func TestSyncFirstAsksForTheReleasesManifestsBeforeTheSync(t *testing.T) {
	const timeout = 120 * time.Second
	for _, tc := range []struct {
		name           string
		mode           deploy.GenerateFirst
		reconciliation time.Duration
		comparedAgo    time.Duration // 0: never compared
		fail           bool
		generates      bool
	}{
		{name: "always", mode: deploy.GenerateAlways, reconciliation: timeout, comparedAgo: time.Second, generates: true},
		{name: "always, fails", mode: deploy.GenerateAlways, reconciliation: timeout, fail: true},
		{name: "never", mode: deploy.GenerateNever, reconciliation: timeout},
		{name: "expiring, never compared", mode: deploy.GenerateWhenExpiring, reconciliation: timeout, generates: true},
		{name: "expiring, compared 115s ago", mode: deploy.GenerateWhenExpiring, reconciliation: timeout, comparedAgo: 115 * time.Second, generates: true},
		{name: "expiring, compared 5m ago", mode: deploy.GenerateWhenExpiring, reconciliation: timeout, comparedAgo: 5 * time.Minute, generates: true},
		{name: "expiring, compared 30s ago", mode: deploy.GenerateWhenExpiring, reconciliation: timeout, comparedAgo: 30 * time.Second},
		// Before 3.5.1 Argo CD counts every comparison expired with its
		// timer off, after it none: the bridge can't tell, and asks.
		{name: "expiring, Argo CD's timer off", mode: deploy.GenerateWhenExpiring, comparedAgo: time.Second, generates: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argo := argocdtest.New(t)
			st := storetest.New(t, true).Store(t, "")
			view, url := gitView(t, argo, st)
			a := automatedApp("auto", "prod/payments", url("prod/payments"))
			if tc.comparedAgo > 0 {
				a.Status.ReconciledAt = &metav1.Time{Time: time.Now().Add(-tc.comparedAgo)}
			}
			argo.Put(a)
			if tc.fail {
				argo.FailNext("manifests", codes.Unavailable, 1)
			}
			r := newRig(t, argo, st, func(c *deploy.Config) {
				c.Revisions, c.SyncAutomated, c.GenerateFirst, c.Reconciliation = view, true, tc.mode, tc.reconciliation
			})
			gen := publish(t, st, "prod/payments", "one")
			r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen, Source: deploy.SourcePush})
			waitCalls(t, argo, "sync", "auto", 1)
			waitState(t, r.deployer, gen, deploy.StateDeployed)
			sha, err := view.Commit(context.Background(), "prod/payments", gen)
			if err != nil {
				t.Fatal(err)
			}
			var methods []string
			for _, c := range argo.Calls() {
				if c.Name != "auto" {
					continue
				}
				methods = append(methods, c.Method)
				if c.Method == "manifests" && c.Revision != sha {
					t.Errorf("manifests asked for at %q, want the release's commit %s", c.Revision, sha)
				}
			}
			want := []string{"sync"}
			if tc.generates {
				want = []string{"manifests", "sync"}
			}
			if !slices.Equal(methods, want) {
				t.Errorf("calls for auto: %v, want %v", methods, want)
			}
			// The failed call was made, and counted: not skipped.
			failed := &labelled{reg: r.registry, name: "bucketops_argocd_errors_total", labels: map[string]string{"call": "get_manifests"}}
			got := 0.0
			if testutil.CollectAndCount(failed) > 0 {
				got = testutil.ToFloat64(failed)
			}
			if want := map[bool]float64{true: 1}[tc.fail]; got != want {
				t.Errorf("failed get_manifests calls counted: %v, want %v", got, want)
			}
		})
	}
}

// --generate-first takes the modes by name, and the booleans it took when
// it was a switch; anything else is refused with what it takes.
func TestGenerateFirstFlag(t *testing.T) {
	for in, want := range map[string]deploy.GenerateFirst{
		"expiring": deploy.GenerateWhenExpiring, "always": deploy.GenerateAlways, "never": deploy.GenerateNever,
		"true": deploy.GenerateAlways, "false": deploy.GenerateNever, "1": deploy.GenerateAlways, "F": deploy.GenerateNever,
	} {
		var g deploy.GenerateFirst
		if err := g.UnmarshalText([]byte(in)); err != nil || g != want {
			t.Errorf("%q: %v, %v; want %v", in, g, err, want)
		}
	}
	var g deploy.GenerateFirst
	if err := g.UnmarshalText([]byte("sometimes")); err == nil || !strings.Contains(err.Error(), "expiring, always or never") {
		t.Errorf("sometimes: %v, want an error naming the modes", err)
	}
	if b, _ := deploy.GenerateWhenExpiring.MarshalText(); string(b) != "expiring" {
		t.Errorf("the default prints as %q, want expiring", b)
	}
}
