package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// deploysOf waits until the deployer's index holds n Applications of app
// and returns its record.
func deploysOf(t *testing.T, d *deploy.Deployer, app string, n int) deploy.Deploys {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := d.Deploys(t.Context(), app)
		if err == nil && len(ds.Applications) == n {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("deploys of %s: %+v %v, want %d Applications", app, ds, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// history is an Application's status.history: commit and deployedAt, in
// order.
func history(entries ...any) v1alpha1.RevisionHistories {
	var h v1alpha1.RevisionHistories
	for i := 0; i < len(entries); i += 2 {
		at := metav1.NewTime(entries[i+1].(time.Time))
		started := metav1.NewTime(at.Add(-3 * time.Second))
		h = append(h, v1alpha1.RevisionHistory{ID: int64(i/2 + 1), Revision: entries[i].(string), DeployedAt: at, DeployStartedAt: &started})
	}
	return h
}

func releaseOf(t *testing.T, st *store.Store, app string, gen int64) store.Release {
	t.Helper()
	rel, err := st.Stat(context.Background(), store.Ref{App: app, Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func onApp(r deploy.ReleaseDeploys, name string) deploy.ReleaseOnApp {
	for _, a := range r.Applications {
		if a.Name == name {
			return a
		}
	}
	return deploy.ReleaseOnApp{}
}

// Deploys reads Argo CD's own record: each Application's history, as
// releases through the git view, its ComparisonError and its operation.
func TestDeploys(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	ctx := context.Background()
	const app = "prod/payments"
	var gens []int64
	var shas []string
	for i := range 5 {
		gen := publish(t, st, app, fmt.Sprint(i+1))
		sha, err := view.Commit(ctx, app, gen)
		if err != nil {
			t.Fatal(err)
		}
		gens, shas = append(gens, gen), append(shas, sha)
	}
	// Argo CD's times have whole seconds.
	t0 := time.Now().Add(time.Minute).Truncate(time.Second).UTC()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	// prod: release 1, then 2, then an Argo CD rollback to 1. Its last
	// sync, of release 3, failed.
	prod := viewApp("payments-prod", app, url(app))
	prod.Status.History = history(shas[0], at(1), shas[1], at(3), shas[0], at(5))
	prod.Status.OperationState = &v1alpha1.OperationState{
		Phase: synccommon.OperationFailed, Message: `one or more objects failed to apply: ConfigMap "Bad_Name" is invalid`,
		StartedAt: metav1.NewTime(at(6)), SyncResult: &v1alpha1.SyncOperationResult{Revision: shas[2]},
	}
	// staging, in another namespace: release 2 before prod had it, then
	// 3; Argo CD refuses release 4.
	staging := viewApp("payments-staging", app, url(app))
	staging.Namespace = "team-pay"
	staging.Status.History = history(shas[1], at(2), shas[2], at(4))
	staging.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionComparisonError,
		Message: fmt.Sprintf("Failed to load target state: rpc error: code = Unknown desc = plugin sidecar failed. bucketops: %s@%d: untrusted_release (403): no signature", app, gens[3])}}
	argo.Put(prod)
	argo.Put(staging)
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
	ds := deploysOf(t, r.deployer, app, 2)

	t.Run("a release deployed to two Applications at different times is live on both, each from its own deploy", func(t *testing.T) {
		rd := ds.Release(releaseOf(t, st, app, gens[1]))
		if rd.Verdict != deploy.VerdictDeployed {
			t.Fatalf("verdict %s, want deployed: %+v", rd.Verdict, rd)
		}
		p, s := onApp(rd, "payments-prod"), onApp(rd, "payments-staging")
		if len(p.Live) != 1 || !p.Live[0].DeployedAt.Equal(at(3)) || p.Live[0].Until == nil || !p.Live[0].Until.Equal(at(5)) {
			t.Errorf("on prod: %+v, want live from minute 3 to 5", p.Live)
		}
		if len(s.Live) != 1 || !s.Live[0].DeployedAt.Equal(at(2)) || s.Live[0].Until == nil || !s.Live[0].Until.Equal(at(4)) {
			t.Errorf("on staging: %+v, want live from minute 2 to 4", s.Live)
		}
		if s.Live[0].DeployStartedAt == nil || !s.Live[0].DeployStartedAt.Equal(at(2).Add(-3*time.Second)) {
			t.Errorf("deployStartedAt %v, want Argo CD's", s.Live[0].DeployStartedAt)
		}
		want := []string{
			"live on payments-prod from " + clock(at(3)) + " to " + clock(at(5)),
			"live on team-pay/payments-staging from " + clock(at(2)) + " to " + clock(at(4)),
		}
		if !slices.Equal(rd.Summary, want) {
			t.Errorf("summary %q, want %q", rd.Summary, want)
		}
	})

	t.Run("after a rollback the older release is live twice, the second time until now", func(t *testing.T) {
		rd := ds.Release(releaseOf(t, st, app, gens[0]))
		p := onApp(rd, "payments-prod")
		if len(p.Live) != 2 || p.Live[0].Until == nil || !p.Live[0].Until.Equal(at(3)) || p.Live[1].Until != nil || !p.Live[1].DeployedAt.Equal(at(5)) {
			t.Fatalf("on prod: %+v, want minutes 1 to 3, and since 5", p.Live)
		}
		if !slices.Contains(rd.Summary, "live on payments-prod since "+clock(at(5))+" (now)") {
			t.Errorf("summary %q", rd.Summary)
		}
		for m, want := range map[int]int64{0: 0, 2: gens[0], 4: gens[1], 7: gens[0]} {
			var got int64
			for _, l := range ds.LiveAt(at(m)) {
				if l.Application == "payments-prod" {
					got = l.Generation
				}
			}
			if got != want {
				t.Errorf("live on prod at minute %d: %d, want %d", m, got, want)
			}
		}
	})

	t.Run("a release Argo CD refuses says so with Argo CD's message", func(t *testing.T) {
		rd := ds.Release(releaseOf(t, st, app, gens[3]))
		if rd.Verdict != deploy.VerdictRefused || onApp(rd, "payments-staging").Verdict != deploy.VerdictRefused || onApp(rd, "payments-prod").Verdict != deploy.VerdictNeverDeployed {
			t.Fatalf("%+v, want refused on staging", rd)
		}
		if len(rd.Summary) != 1 || !strings.HasPrefix(rd.Summary[0], "refused by Argo CD on team-pay/payments-staging: ") || !strings.Contains(rd.Summary[0], "untrusted_release (403): no signature") {
			t.Errorf("summary %q", rd.Summary)
		}
		// Another app's generation in the message is not this one's.
		if other := ds.Release(store.Release{App: app, Generation: gens[3] / 10}); other.Verdict == deploy.VerdictRefused {
			t.Errorf("a prefix of the generation read as refused: %+v", other)
		}
	})

	t.Run("a failed sync of a release deployed elsewhere says both", func(t *testing.T) {
		rd := ds.Release(releaseOf(t, st, app, gens[2]))
		if onApp(rd, "payments-prod").Verdict != deploy.VerdictSyncFailed || onApp(rd, "payments-staging").Verdict != deploy.VerdictDeployed {
			t.Fatalf("%+v", rd)
		}
		if !slices.ContainsFunc(rd.Summary, func(s string) bool { return strings.HasPrefix(s, "sync failed on payments-prod: ") }) {
			t.Errorf("summary %q", rd.Summary)
		}
	})

	t.Run("a release no Application ran is never deployed", func(t *testing.T) {
		rd := ds.Release(releaseOf(t, st, app, gens[4]))
		if rd.Verdict != deploy.VerdictNeverDeployed || !slices.Equal(rd.Summary, []string{"never deployed"}) {
			t.Errorf("%+v, want never deployed", rd)
		}
	})

	t.Run("the record is the same whichever replica reads it", func(t *testing.T) {
		other := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
		again := deploysOf(t, other.deployer, app, 2)
		again.At = ds.At
		a, _ := json.Marshal(again)
		b, _ := json.Marshal(ds)
		if string(a) != string(b) {
			t.Errorf("another deployer read\n%s\nthe first\n%s", a, b)
		}
		if n := len(argo.Calls()); n != 0 {
			t.Errorf("%d refreshes or syncs: reading the record asks Argo CD nothing", n)
		}
	})
}

// Argo CD keeps the last revisionHistoryLimit deploys: a release older
// than the oldest one kept may have been deployed, and the record says it
// no longer knows rather than "never deployed".
func TestDeploysOlderThanWhatArgoCDKeeps(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	ctx := context.Background()
	const app = "prod/old"
	var gens []int64
	var shas []string
	for i := range 3 {
		gen := publish(t, st, app, fmt.Sprint(i+1))
		sha, _ := view.Commit(ctx, app, gen)
		gens, shas = append(gens, gen), append(shas, sha)
	}
	t0 := time.Now().Add(time.Minute).Truncate(time.Second).UTC()
	for _, c := range []struct {
		limit int64
		want  deploy.Verdict
		line  string
	}{
		{2, deploy.VerdictForgotten, "older than what Argo CD keeps (the last 2 deploys of each Application)"},
		{10, deploy.VerdictNeverDeployed, "never deployed"},
	} {
		t.Run(fmt.Sprintf("with revisionHistoryLimit %d and 2 deploys kept, the first release is %s", c.limit, c.want), func(t *testing.T) {
			a := viewApp("old", app, url(app))
			a.Spec.RevisionHistoryLimit = &c.limit
			a.Status.History = history(shas[1], t0, shas[2], t0.Add(time.Minute))
			argo.Put(a)
			r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
			ds := deploysOf(t, r.deployer, app, 1)
			rd := ds.Release(releaseOf(t, st, app, gens[0]))
			if rd.Verdict != c.want || !slices.Equal(rd.Summary, []string{c.line}) {
				t.Errorf("%+v, want %s: %q", rd, c.want, c.line)
			}
			// Before the oldest deploy kept, what was live is as unknown.
			live := ds.LiveAt(t0.Add(-time.Hour))
			if wantLive := map[bool]deploy.Verdict{true: deploy.VerdictForgotten, false: deploy.VerdictNeverDeployed}[c.limit == 2]; len(live) != 1 || live[0].Verdict != wantLive {
				t.Errorf("live an hour before: %+v, want %s", live, wantLive)
			}
			// A release published after the oldest deploy kept would be
			// in the history had it been deployed.
			late := store.Release{App: app, Generation: gens[2] + 1, Time: t0.Add(30 * time.Second)}
			if v := ds.Release(late).Verdict; v != deploy.VerdictNeverDeployed {
				t.Errorf("a release newer than the oldest deploy kept: %s, want never deployed", v)
			}
		})
	}
}

func TestDeploysWithoutArgoCD(t *testing.T) {
	d, err := deploy.New(deploy.Config{
		Releases: storetest.New(t, true).Store(t, ""),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Deploys(t.Context(), "prod/payments"); !errors.Is(err, deploy.ErrNoArgoCD) {
		t.Errorf("deploys: %v, want ErrNoArgoCD", err)
	}
}

func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// A commit in an Application's history that names no release of its app
// (from before it followed the git view) is a deploy of an unknown
// release, and costs the bucket a request once, not at every reading.
func TestDeploysOfACommitOfAnotherRepository(t *testing.T) {
	argo := argocdtest.New(t)
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	view, url := gitView(t, argo, st)
	const app = "prod/legacy"
	gen := publish(t, st, app, "1")
	sha, err := view.Commit(t.Context(), app, gen)
	if err != nil {
		t.Fatal(err)
	}
	foreign := strings.Repeat("ab", 20)
	t0 := time.Now().Truncate(time.Second)
	a := viewApp("legacy", app, url(app))
	a.Status.History = history(foreign, t0, sha, t0.Add(time.Minute))
	argo.Put(a)
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
	ds := deploysOf(t, r.deployer, app, 1)
	d := ds.Applications[0].Deploys
	if len(d) != 2 || d[0].Generation != 0 || d[0].Revision != foreign || d[1].Generation != gen {
		t.Fatalf("deploys %+v, want an unknown release, then %d", d, gen)
	}
	before := tb.Requests.Load()
	for range 3 {
		if _, err := r.deployer.Deploys(t.Context(), app); err != nil {
			t.Fatal(err)
		}
	}
	if n := tb.Requests.Load() - before; n != 0 {
		t.Errorf("%d requests to the bucket for three readings, want none: the unknown commit is remembered", n)
	}
	if rd := ds.Release(releaseOf(t, st, app, gen)); rd.Verdict != deploy.VerdictDeployed || len(rd.Summary) != 1 || !strings.Contains(rd.Summary[0], "since") {
		t.Errorf("%+v", rd)
	}
}
