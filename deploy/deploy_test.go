package deploy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// rig is a deployer against a real store on fakestorage and the fake Argo
// CD, reached through Argo CD's own client.
type rig struct {
	argo     *argocdtest.Server
	store    *store.Store
	deployer *deploy.Deployer
	registry *prometheus.Registry
	cancel   context.CancelFunc
	done     chan struct{}
}

func newRig(t testing.TB, argo *argocdtest.Server, st *store.Store, mod func(*deploy.Config)) *rig {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := deploy.Config{
		Releases:   st,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry:   reg,
		Coalesce:   20 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond,
		Connect: func() (application.ApplicationServiceClient, io.Closer, error) {
			return argo.Client(t), io.NopCloser(nil), nil
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	d, err := deploy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{argo: argo, store: st, deployer: d, registry: reg, done: make(chan struct{})}
	r.start(t)
	return r
}

func (r *rig) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.deployer.Run(ctx)
	}()
	t.Cleanup(r.stop)
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
}

// publish writes a release of app and returns its generation.
func publish(t *testing.T, st *store.Store, app, content string) int64 {
	t.Helper()
	res, err := st.Publish(context.Background(), app, store.Publication{
		Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  v: " + content + "\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Generation
}

// waitHandled waits until app's generation gen has been refreshed.
func waitHandled(t *testing.T, d *deploy.Deployer, app string, gen int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if h, _ := d.Handled(app); h >= gen {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	h, _ := d.Handled(app)
	t.Fatalf("%s: handled generation %d, want %d", app, h, gen)
}

func refreshesOf(calls []argocdtest.Call) map[string]int {
	n := map[string]int{}
	for _, c := range calls {
		n[c.Name]++
	}
	return n
}

func TestBurstCoalescesToOneRefreshPerApp(t *testing.T) {
	argo := argocdtest.New(t)
	const apps = 20
	for i := range apps {
		argo.Put(argocdtest.PluginApp(fmt.Sprintf("app-%02d", i), "", fmt.Sprintf("prod/app-%02d", i)))
	}
	// A window long enough for the whole burst: what's asserted is that a
	// burst becomes one refresh of its newest generation.
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), func(c *deploy.Config) { c.Coalesce = 2 * time.Second })

	// 1,000 events: 50 per app, shuffled (out of order), a third of them
	// sent twice (at-least-once delivery).
	type ev struct {
		app string
		gen int64
	}
	var events []ev
	newest := map[string]int64{}
	for i := range apps {
		app := fmt.Sprintf("prod/app-%02d", i)
		for g := range 50 {
			gen := int64(1000 + g)
			events = append(events, ev{app, gen})
			newest[app] = gen
		}
	}
	rand.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(events); i += 4 {
				e := events[i]
				r.deployer.Notify(deploy.Event{App: e.app, Generation: e.gen, Source: deploy.SourcePush, Time: time.Now()})
				if i%3 == 0 {
					r.deployer.Notify(deploy.Event{App: e.app, Generation: e.gen, Source: deploy.SourcePush, Time: time.Now()})
				}
			}
		})
	}
	wg.Wait()

	for app, gen := range newest {
		waitHandled(t, r.deployer, app, gen)
	}
	got := refreshesOf(argo.Refreshes())
	for i := range apps {
		if n := got[fmt.Sprintf("app-%02d", i)]; n != 1 {
			t.Errorf("app-%02d: %d refreshes, want exactly 1", i, n)
		}
	}
	if n := len(argo.Syncs()); n != 0 {
		t.Errorf("%d syncs without --sync", n)
	}
	if n := argo.ListCalls(); n > 2 {
		t.Errorf("%d List calls for 1,000 events, want the watch's and its one relist at most (the index comes from the watch)", n)
	}
	accepted := testutil.ToFloat64(metric(t, r.registry, "push", "accepted"))
	duplicates := testutil.ToFloat64(metric(t, r.registry, "push", "duplicate"))
	if int(accepted+duplicates) != 1000+334 || accepted < apps {
		t.Errorf("events counted: %v accepted + %v duplicate, want 1334 in all", accepted, duplicates)
	}
}

// metric returns bucketops_events_total{source, outcome}.
func metric(t *testing.T, reg *prometheus.Registry, source, outcome string) prometheus.Collector {
	t.Helper()
	return &labelled{reg: reg, name: "bucketops_events_total", labels: map[string]string{"source": source, "outcome": outcome}}
}

// labelled is one labelled series of a registry, as a collector testutil
// can read.
type labelled struct {
	reg    *prometheus.Registry
	name   string
	labels map[string]string
}

func (l *labelled) Describe(chan<- *prometheus.Desc) {}
func (l *labelled) Collect(ch chan<- prometheus.Metric) {
	families, _ := l.reg.Gather()
	for _, f := range families {
		if f.GetName() != l.name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := true
			for _, lp := range m.GetLabel() {
				if want, ok := l.labels[lp.GetName()]; ok && want != lp.GetValue() {
					match = false
				}
			}
			if match {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(l.name, "", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
			}
		}
	}
}

func TestDuplicatesAndOlderGenerationsAreDropped(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), nil)

	if !r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 5, Source: deploy.SourcePull}) {
		t.Fatal("first event dropped")
	}
	waitHandled(t, r.deployer, "prod/payments", 5)
	for _, gen := range []int64{5, 3, 4} {
		if r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: gen, Source: deploy.SourcePull}) {
			t.Errorf("generation %d after 5 was taken as new", gen)
		}
	}
	if !r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 6, Source: deploy.SourcePull}) {
		t.Fatal("generation 6 dropped")
	}
	waitHandled(t, r.deployer, "prod/payments", 6)
	if n := len(argo.Refreshes()); n != 2 {
		t.Errorf("%d refreshes, want 2 (generations 5 and 6)", n)
	}
	if got := testutil.ToFloat64(metric(t, r.registry, "pull", "duplicate")); got != 3 {
		t.Errorf("duplicates counted: %v, want 3", got)
	}
}

func TestSlowArgoCDNeverBlocksIntake(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{})
	argo.OnRefresh(func(a *v1alpha1.Application) {
		once.Do(func() { close(entered) })
		<-release // Argo CD hangs
	})
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), func(c *deploy.Config) { c.Workers = 1 })
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 1, Source: deploy.SourcePush})
	<-entered
	// With the only worker stuck in Argo CD, events still go in. Argo CD
	// stays stuck until intake is done or has plainly hung: the bound is a
	// hang detector, far above what 2,000 Notify calls take.
	intake := make(chan struct{})
	go func() {
		defer close(intake)
		for g := int64(2); g <= 2000; g++ {
			r.deployer.Notify(deploy.Event{App: fmt.Sprintf("prod/app-%d", g%50), Generation: g, Source: deploy.SourcePush})
		}
		r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 7, Source: deploy.SourcePush})
	}()
	select {
	case <-intake:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("event intake blocked while Argo CD hung: Notify waits for Argo CD")
	}
	close(release)
	waitHandled(t, r.deployer, "prod/payments", 7)
}

func TestArgoCDErrorsAreRetried(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	argo.FailNext("get", codes.Unavailable, 3)
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), nil)
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 9, Source: deploy.SourcePush, Time: time.Now()})
	waitHandled(t, r.deployer, "prod/payments", 9)
	if n := len(argo.Refreshes()); n != 1 {
		t.Errorf("%d successful refreshes, want 1 after 3 failures", n)
	}
	// The latency is the refresh's, not each failed attempt's.
	if n := observations(t, r.registry, "bucketops_notify_to_refresh_seconds"); n != 1 {
		t.Errorf("notify-to-refresh latency observed %d times, want once for one refresh", n)
	}
}

// observations is the sample count of a histogram in reg.
func observations(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func TestRotatedArgoCDTokenIsPickedUpWithoutARestart(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	conn := argo.ArgoCD(t)
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), func(c *deploy.Config) { c.Connect = conn.Connect })
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 1, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", 1)

	// The old token expires; the platform team writes the new one into the
	// file the bridge was started with.
	if err := os.WriteFile(conn.TokenFile, []byte(argo.Rotate()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 2, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", 2)
	if n := len(argo.Refreshes()); n != 2 {
		t.Errorf("%d refreshes, want one per generation", n)
	}
}

func TestSyncOnlyWhenOutOfSyncAndNotAutomated(t *testing.T) {
	argo := argocdtest.New(t)
	manual := argocdtest.PluginApp("manual", "", "prod/manual")
	auto := argocdtest.PluginApp("auto", "", "prod/auto")
	auto.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}}
	inSync := argocdtest.PluginApp("insync", "", "prod/insync")
	for _, a := range []*v1alpha1.Application{manual, auto, inSync} {
		argo.Put(a)
	}
	argo.OnRefresh(func(a *v1alpha1.Application) {
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
		if a.Name == "insync" {
			a.Status.Sync.Status = v1alpha1.SyncStatusCodeSynced
		}
	})
	// The first sync finds another operation running, as Argo CD answers.
	argo.FailNext("sync", codes.FailedPrecondition, 1)
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), func(c *deploy.Config) { c.Sync, c.Prune = true, true })
	for _, app := range []string{"prod/manual", "prod/auto", "prod/insync"} {
		r.deployer.Notify(deploy.Event{App: app, Generation: 3, Source: deploy.SourcePush})
	}
	for _, app := range []string{"prod/manual", "prod/auto", "prod/insync"} {
		waitHandled(t, r.deployer, app, 3)
	}
	syncs := argo.Syncs()
	if len(syncs) != 1 || syncs[0].Name != "manual" || !syncs[0].Prune {
		t.Errorf("syncs = %+v, want one pruning sync of manual", syncs)
	}
}

func TestApplicationsFoundByParameterOrEnvAndKeptFresh(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginEnvApp("by-env", "team-a", "prod/payments"))
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), nil)
	r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: 1, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/payments", 1)

	// An Application created after start is found through the watch.
	argo.Put(argocdtest.PluginApp("by-param", "", "prod/payments"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.deployer.Notify(deploy.Event{App: "prod/payments", Generation: time.Now().UnixNano(), Source: deploy.SourcePush})
		if refreshesOf(argo.Refreshes())["by-param"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new Application never refreshed; refreshes %+v", argo.Refreshes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range argo.Refreshes() {
		if c.Name == "by-env" && c.Namespace != "team-a" {
			t.Errorf("refresh of by-env in namespace %q, want team-a", c.Namespace)
		}
	}
	if n := argo.ListCalls(); n > 2 {
		t.Errorf("%d List calls, want the watch's and its one relist at most", n)
	}
}

// The reproduction (make e2e's TestSigning, 2026-12-07): an Application
// created just before its app's first release, on a bridge whose watch
// stream brought the Application after the release: the release was
// dropped ("no Argo CD Application deploys this app") and waited a minute
// for the next poll. It is deployed as soon as the watch brings the
// Application, with no other release and no poll.
func TestReleaseWithoutApplicationIsDeployedWhenTheWatchBringsOne(t *testing.T) {
	argo := argocdtest.New(t)
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), nil)
	r.deployer.Notify(deploy.Event{App: "prod/late", Generation: 1, Source: deploy.SourcePush})
	waitHandled(t, r.deployer, "prod/late", 1)
	if n := refreshesOf(argo.Refreshes())["late"]; n != 0 {
		t.Fatalf("%d refreshes of an Application that doesn't exist", n)
	}

	argo.Put(argocdtest.PluginApp("late", "", "prod/late"))
	waitCalls(t, argo, "refresh", "late", 1)
	// An Application of an app whose release did find one requeues nothing.
	argo.Put(argocdtest.PluginApp("late-2", "", "prod/late"))
	time.Sleep(200 * time.Millisecond)
	if n := refreshesOf(argo.Refreshes()); n["late"] != 1 || n["late-2"] != 0 {
		t.Errorf("refreshes after a second Application: %v, want late once and late-2 none", n)
	}
}

// The same reproduction's cause: argocd-server's Watch lists, then
// subscribes, and an Application created in between reaches the watch
// neither way. The bridge lists once more after the watch starts, and
// deploys the release waiting for that Application.
func TestApplicationCreatedBetweenTheWatchsListingAndSubscriptionIsFound(t *testing.T) {
	argo := argocdtest.New(t)
	argo.BetweenListAndSubscribe(func() { argo.Put(argocdtest.PluginApp("gap", "", "prod/gap")) })
	r := newRig(t, argo, storetest.New(t, true).Store(t, ""), nil)
	r.deployer.Notify(deploy.Event{App: "prod/gap", Generation: 1, Source: deploy.SourcePush})
	waitCalls(t, argo, "refresh", "gap", 1)
	if n := argo.ListCalls(); n != 2 {
		t.Errorf("%d List calls, want 2: the watch's and one after it started", n)
	}
}

func TestLostNotificationIsCaughtByPolling(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	st := storetest.New(t, true).Store(t, "")
	r := newRig(t, argo, st, nil)
	// Published, but no notification reaches the bridge.
	gen := publish(t, st, "prod/payments", "one")
	if n := r.deployer.PollOnce(context.Background()); n != 1 {
		t.Fatalf("poll found %d new releases, want 1", n)
	}
	waitHandled(t, r.deployer, "prod/payments", gen)
	if n := r.deployer.PollOnce(context.Background()); n != 0 {
		t.Errorf("second poll found %d new releases, want 0", n)
	}
}

func TestRestartMidBurstConverges(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	const apps = 10
	for i := range apps {
		argo.Put(argocdtest.PluginApp(fmt.Sprintf("app-%d", i), "", fmt.Sprintf("prod/app-%d", i)))
	}
	first := newRig(t, argo, st, nil)
	newest := map[string]int64{}
	for round := range 3 {
		for i := range apps {
			app := fmt.Sprintf("prod/app-%d", i)
			newest[app] = publish(t, st, app, fmt.Sprint(round))
			// Only the first round's notifications arrive before the crash.
			if round == 0 {
				first.deployer.Notify(deploy.Event{App: app, Generation: newest[app], Source: deploy.SourcePull})
			}
		}
	}
	first.stop()

	second := newRig(t, argo, st, nil)
	second.deployer.PollOnce(context.Background()) // what Poll does at start
	for app, gen := range newest {
		waitHandled(t, second.deployer, app, gen)
	}
	if n := len(refreshesOf(argo.Refreshes())); n != apps {
		t.Errorf("%d Applications refreshed, want %d", n, apps)
	}
}

// gitView serves st's git view on loopback, makes the fake Argo CD
// resolve revisions from it with go-git as the repo-server does, and
// returns it for the deployer's Revisions and the view's URL for app.
func gitView(t testing.TB, argo *argocdtest.Server, st *store.Store) (*gitview.View, func(app string) string) {
	t.Helper()
	v, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Handler())
	t.Cleanup(srv.Close)
	argo.Resolve(argocdtest.LsRemote("", ""))
	return v, func(app string) string { return srv.URL + "/" + app + ".git" }
}

// viewApp is an Application of app whose repoURL is its git view, at
// targetRevision main.
func viewApp(name, app, url string) *v1alpha1.Application {
	a := argocdtest.PluginApp(name, "", app)
	a.Spec.Source.RepoURL, a.Spec.Source.TargetRevision = url, "main"
	return a
}

func TestStatus(t *testing.T) {
	argo := argocdtest.New(t)
	st := storetest.New(t, true).Store(t, "")
	view, url := gitView(t, argo, st)
	r := newRig(t, argo, st, func(c *deploy.Config) { c.Revisions = view })
	ctx := context.Background()
	gen1 := publish(t, st, "prod/payments", "one")

	waitIndex := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := r.deployer.Status(ctx, "prod/payments", 0)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitIndex()
	s, err := r.deployer.Status(ctx, "prod/payments", 0)
	if err != nil || s.State != deploy.StatePending || s.Generation != gen1 {
		t.Fatalf("no Application: %+v, %v; want pending for the head", s, err)
	}

	argo.Put(viewApp("payments", "prod/payments", url("prod/payments")))
	status := func(gen int64) deploy.Status {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s, err := r.deployer.Status(ctx, "prod/payments", gen)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Applications) > 0 || time.Now().After(deadline) {
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if s := status(gen1); s.State != deploy.StatePending {
		t.Fatalf("not compared yet: %+v, want pending", s)
	}
	commit := func(gen int64) string {
		sha, err := view.Commit(ctx, "prod/payments", gen)
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	now := metav1.Now()
	// Argo CD compared generation 1, and syncs it.
	argo.Update("", "payments", func(a *v1alpha1.Application) {
		a.Status.Sync.Revision = commit(gen1)
		a.Status.OperationState = &v1alpha1.OperationState{Phase: synccommon.OperationRunning, Message: "syncing", StartedAt: now}
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
	})
	waitState(t, r.deployer, gen1, deploy.StateProgressing)

	// Synced and Healthy at it: deployed.
	argo.Update("", "payments", func(a *v1alpha1.Application) {
		fin := metav1.NewTime(time.Now().Add(time.Second))
		a.Status.OperationState = &v1alpha1.OperationState{Phase: synccommon.OperationSucceeded, Message: "ok", StartedAt: now, FinishedAt: &fin,
			SyncResult: &v1alpha1.SyncOperationResult{Revision: commit(gen1)}}
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeSynced
		a.Status.Health.Status = health.HealthStatusHealthy
		a.Status.ReconciledAt = &fin
	})
	s = waitState(t, r.deployer, gen1, deploy.StateDeployed)
	if a := s.Applications[0]; a.Revision != commit(gen1) || a.Compared != gen1 {
		t.Errorf("application status %+v, want revision %s naming generation %d", a, commit(gen1), gen1)
	}

	// A newer release nobody compared yet: the old one is still deployed
	// (it is what runs), the new one pending.
	gen2 := publish(t, st, "prod/payments", "two")
	if s := status(gen2); s.State != deploy.StatePending {
		t.Errorf("generation 2 before it is compared: %s, want pending", s.State)
	}
	// A third one replaces the second before Argo CD compared it.
	gen3 := publish(t, st, "prod/payments", "three")
	if s := status(gen2); s.State != deploy.StateSuperseded {
		t.Errorf("generation 2 after 3 landed: %s (%s), want superseded", s.State, s.Message)
	}
	// Comparing 3 and failing its sync fails 2 and 3: neither is running.
	argo.Update("", "payments", func(a *v1alpha1.Application) {
		fin := metav1.NewTime(time.Now().Add(time.Second))
		a.Status.Sync.Revision = commit(gen3)
		a.Status.OperationState = &v1alpha1.OperationState{Phase: synccommon.OperationFailed, Message: `ConfigMap "Bad_Name" is invalid`, StartedAt: now, FinishedAt: &fin,
			SyncResult: &v1alpha1.SyncOperationResult{Revision: commit(gen3)}}
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
	})
	s = waitState(t, r.deployer, gen3, deploy.StateFailed)
	if want := `sync failed: ConfigMap "Bad_Name" is invalid`; s.Applications[0].Message != want {
		t.Errorf("message %q, want %q", s.Applications[0].Message, want)
	}
	if s := status(gen2); s.State != deploy.StateFailed {
		t.Errorf("generation 2 after 3 failed: %s, want failed", s.State)
	}

	// A fourth release syncs, and then the app goes Degraded: failed, with
	// the health message.
	gen4 := publish(t, st, "prod/payments", "four")
	argo.Update("", "payments", func(a *v1alpha1.Application) {
		fin := metav1.NewTime(time.Now().Add(time.Second))
		a.Status.Sync.Revision = commit(gen4)
		a.Status.OperationState = &v1alpha1.OperationState{Phase: synccommon.OperationSucceeded, Message: "ok", StartedAt: now, FinishedAt: &fin,
			SyncResult: &v1alpha1.SyncOperationResult{Revision: commit(gen4)}}
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeSynced
		a.Status.Health = v1alpha1.HealthStatus{Status: health.HealthStatusDegraded, Message: "Deployment api exceeded its progress deadline"}
		a.Status.ReconciledAt = &fin
	})
	s = waitState(t, r.deployer, gen4, deploy.StateFailed)
	if want := "Degraded: Deployment api exceeded its progress deadline"; s.Applications[0].Message != want {
		t.Errorf("message %q, want %q", s.Applications[0].Message, want)
	}

	// Argo CD can't generate the manifests of a fifth: failed, with its
	// message, once Argo CD tried after the release existed.
	gen5 := publish(t, st, "prod/payments", "five")
	argo.Update("", "payments", func(a *v1alpha1.Application) {
		later := metav1.NewTime(time.Now().Add(2 * time.Second))
		a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionComparisonError, Message: "digest mismatch"}}
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeUnknown
		a.Status.ReconciledAt = &later
	})
	if s := waitState(t, r.deployer, gen5, deploy.StateFailed); !strings.Contains(s.Message, "digest mismatch") {
		t.Errorf("message %q", s.Message)
	}

	// Pinned to the first release by its commit: that Application won't
	// deploy the fifth.
	argo.Update("", "payments", func(a *v1alpha1.Application) {
		a.Spec.Source.TargetRevision = commit(gen1)
		a.Status.Conditions = nil
		a.Status.Sync.Revision = commit(gen1)
		a.Status.Health.Status = health.HealthStatusHealthy
	})
	if s := waitState(t, r.deployer, gen5, deploy.StatePinned); !strings.Contains(s.Message, "pinned to generation") {
		t.Errorf("message %q", s.Message)
	}

	// A generation that doesn't exist yet.
	if _, err := r.deployer.Status(ctx, "prod/payments", gen5+1); err == nil {
		t.Error("status of a future generation: no error")
	}
	if _, err := r.deployer.Status(ctx, "prod/nothing", 0); err == nil {
		t.Error("status of an unknown app: no error")
	}
}

func waitState(t *testing.T, d *deploy.Deployer, gen int64, want deploy.State) deploy.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := d.Status(context.Background(), "prod/payments", gen)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s (%s), want %s", s.State, s.Message, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNoArgoCD(t *testing.T) {
	d, err := deploy.New(deploy.Config{
		Releases: storetest.New(t, true).Store(t, ""),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Enabled() {
		t.Error("enabled without Connect")
	}
	if _, err := d.Status(context.Background(), "prod/payments", 0); err != deploy.ErrNoArgoCD {
		t.Errorf("status: %v, want ErrNoArgoCD", err)
	}
}
