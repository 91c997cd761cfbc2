package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store/storetest"
)

// Every release is a commit of the git view, so a normal refresh makes Argo
// CD resolve the new revision: the bridge never asks for a hard one.
func TestRefreshesAreNormalAndResolveTheNewRevision(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	argo.Put(viewApp("payments", "prod/payments", url("prod/payments")))
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
	for _, v := range []string{"one", "two"} {
		gen := publish(t, st, "prod/payments", v)
		r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen, Source: deploy.SourcePush, Time: time.Now()})
		waitHandled(t, r.deployer, "prod/payments", gen)
		sha, err := view.Commit(context.Background(), "prod/payments", gen)
		if err != nil {
			t.Fatal(err)
		}
		calls := argo.Refreshes()
		if last := calls[len(calls)-1]; last.Revision != sha {
			t.Errorf("the refresh for generation %d resolved %s, want its commit %s", gen, last.Revision, sha)
		}
	}
	for _, c := range argo.Refreshes() {
		if c.Refresh != string(v1alpha1.RefreshTypeNormal) {
			t.Errorf("a %q refresh, want only normal ones", c.Refresh)
		}
	}
	if n := observations(t, r.registry, "bucketops_finalize_to_refresh_seconds"); n != 2 {
		t.Errorf("finalize-to-refresh latency observed %d times, want 2", n)
	}
}

// Argo CD refusing a call for good (permission, not found, invalid) fails
// the generation with Argo CD's message instead of being retried forever.
func TestPermanentArgoCDErrorsFailTheRelease(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	argo.FailNext("get", codes.PermissionDenied, 1000)
	r := newRig(t, argo, st, nil)
	gen := publish(t, st, "prod/payments", "one")
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen, Source: deploy.SourcePush})
	deadline := time.Now().Add(10 * time.Second)
	var s deploy.Status
	for {
		var err error
		if s, err = r.deployer.Status(context.Background(), "prod/payments", gen); err == nil && s.State == deploy.StateFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, want failed", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(s.Message, "PermissionDenied") {
		t.Errorf("message %q, want Argo CD's refusal", s.Message)
	}
	time.Sleep(300 * time.Millisecond) // several back-off periods of the rig (10-100 ms)
	if n := refusals(t, r.registry); n != 1 {
		t.Errorf("Argo CD was asked %v times after refusing for good, want once", n)
	}
	// A newer release is tried afresh, and once Argo CD lets it, works.
	argo.FailNext("get", codes.PermissionDenied, 0)
	gen2 := publish(t, st, "prod/payments", "two")
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen2, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", gen2)
}

// refusals counts the refreshes Argo CD refused with PermissionDenied, by
// the bridge's metric.
func refusals(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "bucketops_argocd_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["call"] == "refresh" && labels["code"] == "PermissionDenied" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A restarted bridge doesn't refresh the apps Argo CD already runs at
// their head: its first poll only catches up with what changed.
func TestARestartRefreshesOnlyWhatChanged(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	ctx := context.Background()
	var gens []int64
	for _, app := range []string{"prod/a", "prod/b", "prod/c"} {
		gen := publish(t, st, app, "one")
		gens = append(gens, gen)
		a := viewApp(strings.TrimPrefix(app, "prod/"), app, url(app))
		sha, _ := view.Commit(ctx, app, gen)
		a.Status.Sync.Revision = sha // Argo CD compared it before the restart
		argo.Put(a)
	}
	// While the bridge was down, prod/c got a release.
	newC := publish(t, st, "prod/c", "two")
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
	pollCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.deployer.Poll(pollCtx, time.Hour)
	waitHandled(t, r.deployer, "prod/c", newC)
	for i, app := range []string{"prod/a", "prod/b"} {
		waitHandled(t, r.deployer, app, gens[i])
	}
	refreshed := refreshesOf(argo.Refreshes())
	if refreshed["a"] != 0 || refreshed["b"] != 0 || refreshed["c"] != 1 {
		t.Errorf("refreshes after a restart: %v, want only c, once", refreshed)
	}
}

// A sync the bridge requested that Argo CD's controller doesn't start
// (argo-cd#18500) is nudged with a refresh.
func TestAnUnstartedSyncIsNudged(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	argo.OnRefresh(func(a *v1alpha1.Application) { a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync })
	argo.OnSync(func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
		// Accepted, set on the Application, never started.
		a.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{}}
		return nil
	})
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Sync, c.NudgeAfter = true, 100*time.Millisecond })
	gen := publish(t, st, "prod/payments", "one")
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen, Source: deploy.SourcePush})
	deadline := time.Now().Add(10 * time.Second)
	for len(argo.Refreshes()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d refreshes: the unstarted sync was never nudged", len(argo.Refreshes()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(argo.Syncs()); n != 1 {
		t.Errorf("%d syncs, want 1: a nudge is a refresh", n)
	}
}

// After a rollback in Argo CD, the release it deployed last is live though
// Argo CD compares main's newer one: status says so for both.
func TestStatusAfterAnArgoCDRollback(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
	ctx := context.Background()
	gen1 := publish(t, st, "prod/payments", "one")
	gen2 := publish(t, st, "prod/payments", "two")
	sha1, _ := view.Commit(ctx, "prod/payments", gen1)
	sha2, _ := view.Commit(ctx, "prod/payments", gen2)
	a := viewApp("payments", "prod/payments", url("prod/payments"))
	a.Status.Sync = v1alpha1.SyncStatus{Status: v1alpha1.SyncStatusCodeOutOfSync, Revision: sha2}
	a.Status.Health.Status = "Healthy"
	a.Status.History = v1alpha1.RevisionHistories{{ID: 1, Revision: sha2}, {ID: 2, Revision: sha1}}
	argo.Put(a)
	for deadline := time.Now().Add(10 * time.Second); !r.deployer.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("index never loaded")
		}
	}
	var s1 deploy.Status
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if s1, err = r.deployer.Status(ctx, "prod/payments", gen1); err == nil && len(s1.Applications) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%+v %v", s1, err)
		}
	}
	if s1.State != deploy.StateDeployed || s1.Applications[0].Live != gen1 {
		t.Errorf("the rolled-back-to release: %+v, want deployed, live", s1)
	}
	s2, err := r.deployer.Status(ctx, "prod/payments", gen2)
	if err != nil || s2.State != deploy.StateProgressing || !strings.Contains(s2.Message, "is live") {
		t.Errorf("main's release after the rollback: %+v %v, want progressing, saying what is live", s2, err)
	}
}
