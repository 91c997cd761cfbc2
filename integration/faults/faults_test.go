//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// TestFaults runs the scenarios in order, each in a world of its own
// (networks, emulators, replicas), removed when it ends.
func TestFaults(t *testing.T) {
	t.Run("1_replicas_share_a_subscription", testSharedSubscription)
	t.Run("2_replica_killed_mid_burst", testReplicaKilled)
	t.Run("3_gcs_paused_during_push", testGCSPaused)
	t.Run("4_bridge_cut_off_from_gcs", testPartition)
	t.Run("5_pubsub_restarted", testPubsubRestart)
	t.Run("6_load_50_writers", testLoad)
}

// appNames are n apps of one team.
func appNames(n int) []string {
	apps := make([]string, n)
	for i := range apps {
		apps[i] = fmt.Sprintf("team/app-%02d", i)
	}
	return apps
}

// release is the canonical stream of app's release seq: a ConfigMap that
// says which release it is.
func release(t testing.TB, app string, seq uint64) *render.Release {
	t.Helper()
	rel, err := newRelease(app, seq)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// newRelease is release for writer goroutines, which must not t.Fatal.
func newRelease(app string, seq uint64) (*render.Release, error) {
	doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  app: %s\n  release: \"%d\"\n",
		applicationName(app), app, seq)
	return render.AssembleStream("configmap.yaml", strings.NewReader(doc))
}

// publish is one CI writer's publish of release seq of app; it may run in
// any goroutine.
func (c *cluster) publish(ctx context.Context, app string, seq uint64) (store.Result, error) {
	rel, err := newRelease(app, seq)
	if err != nil {
		return store.Result{}, err
	}
	return c.store.Publish(ctx, app, store.Publication{
		Data: rel.Bytes, Resources: rel.Resources(), Sequence: seq,
		Author: "ci@faults", Source: fmt.Sprintf("pipeline #%d", seq),
	})
}

// burstStats is what a burst of writers did.
type burstStats struct {
	published, stale atomic.Int64
}

// burst publishes releases 1..n of every app, one CI writer per app, all
// apps at once, counting them in st as they finish (a caller running it in
// a goroutine watches st.published); it reports failures when all are done.
// pace spaces each writer's releases, as pipelines that take a while.
func (c *cluster) burst(apps []string, n int, pace time.Duration, st *burstStats) {
	var wg sync.WaitGroup
	errs := make(chan error, len(apps)*n)
	for _, app := range apps {
		wg.Go(func() {
			for seq := uint64(1); seq <= uint64(n); seq++ {
				if seq > 1 {
					time.Sleep(pace)
				}
				_, err := c.publish(c.t.Context(), app, seq)
				switch {
				case err == nil:
					st.published.Add(1)
				case errors.Is(err, store.ErrStale):
					st.stale.Add(1)
				default:
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.t.Errorf("publish: %v", err)
	}
	if st.stale.Load() > 0 {
		c.t.Errorf("%d publishes were refused as stale, yet each app had one writer publishing in order", st.stale.Load())
	}
}

// checkHeads fails unless every app's head is its release n.
func (c *cluster) checkHeads(apps []string, n uint64) map[string]int64 {
	c.t.Helper()
	heads := map[string]int64{}
	for _, app := range apps {
		h := c.head(app)
		if h.Sequence != n {
			c.t.Errorf("%s: head %s has sequence %d, want %d: a stale release overwrote a newer one", app, h.Ref(), h.Sequence, n)
		}
		heads[app] = h.Generation
	}
	return heads
}

// waitRefreshed waits until every app's head has been refreshed in Argo CD.
func (c *cluster) waitRefreshed(heads map[string]int64, d time.Duration) {
	c.t.Helper()
	var missing []string
	if !eventually(d, func() bool {
		missing = c.unrefreshed(heads)
		return len(missing) == 0
	}) {
		sort.Strings(missing)
		c.t.Fatalf("after %s, %d apps' newest generation was never refreshed in Argo CD: %s", d, len(missing), strings.Join(missing, ", "))
	}
}

func (c *cluster) report(r refreshes) {
	c.t.Helper()
	peers := make([]string, 0, len(r.byPeer))
	for p, n := range r.byPeer {
		peers = append(peers, fmt.Sprintf("%s: %d", p, n))
	}
	sort.Strings(peers)
	c.t.Logf("Argo CD refreshes: %d in all, %d duplicates (an app's generation refreshed again); by replica address: %s",
		r.total, r.duplicates, strings.Join(peers, ", "))
}

// Scenario 1: three replicas share one pull subscription; 30 apps get 10
// releases each from concurrent writers; every app's newest generation is
// refreshed, and duplicates are counted.
func testSharedSubscription(t *testing.T) {
	apps := appNames(30)
	// Polling off: the subscription alone must bring every release.
	c := newCluster(t, options{replicas: 3, poll: 0, apps: apps})
	var st burstStats
	c.burst(apps, 10, 0, &st)
	t.Logf("burst: %d releases published by %d concurrent writers", st.published.Load(), len(apps))
	heads := c.checkHeads(apps, 10)
	c.waitRefreshed(heads, 60*time.Second)

	// Every notification reaches a replica at least once (they may still
	// be arriving: the refreshes of the heads come first), and the
	// replicas share them.
	var pulled float64
	var shares []string
	eventually(30*time.Second, func() bool {
		pulled, shares = 0, nil
		for _, b := range c.bridges {
			n, err := c.metric(b, "bucketops_events_total", `source="pull"`)
			if err != nil {
				t.Fatal(err)
			}
			pulled += n
			shares = append(shares, fmt.Sprintf("%s: %.0f", b.name, n))
		}
		return pulled >= float64(st.published.Load())
	})
	t.Logf("notifications pulled: %.0f for %d writes (%s)", pulled, st.published.Load(), strings.Join(shares, ", "))
	if pulled < float64(st.published.Load()) {
		t.Errorf("the replicas pulled %.0f notifications for %d writes: some were lost", pulled, st.published.Load())
	}
	for i, b := range c.bridges {
		if strings.HasSuffix(shares[i], ": 0") {
			t.Errorf("%s pulled no notification: the subscription isn't shared", b.name)
		}
	}
	c.report(c.refreshes())
}

// Scenario 2: a replica is killed in the middle of a burst and started
// again; every app converges through redelivery or polling, and no
// replica has anything left pending.
func testReplicaKilled(t *testing.T) {
	apps := appNames(30)
	c := newCluster(t, options{replicas: 3, poll: 3 * time.Second, apps: apps})
	victim := c.bridges[1]
	total := int64(len(apps) * 10)
	var st burstStats
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Paced, so the burst lasts seconds and the kill lands inside it.
		c.burst(apps, 10, 300*time.Millisecond, &st)
	}()
	// Kill it from the test's goroutine once a third is published.
	for st.published.Load() < total/3 {
		select {
		case <-done:
			t.Fatal("the burst ended before a third of it was published")
		case <-time.After(time.Millisecond):
		}
	}
	taken, err := c.metric(victim, "bucketops_events_total")
	if err != nil {
		t.Fatal(err)
	}
	c.kill(victim.c)
	killedAt := st.published.Load()
	<-done
	if killedAt >= total {
		t.Fatalf("%s was killed after the whole burst (%d of %d published), not in the middle", victim.name, killedAt, total)
	}
	if taken == 0 {
		t.Errorf("%s had taken no event before it was killed: it wasn't part of the burst", victim.name)
	}
	t.Logf("burst: %d published; %s killed after %d of %d publishes, having taken %.0f events",
		st.published.Load(), victim.name, killedAt, total, taken)
	heads := c.checkHeads(apps, 10)
	c.restartBridge(victim)
	c.waitRefreshed(heads, 90*time.Second)
	for _, b := range c.bridges {
		var pending float64
		if !eventually(30*time.Second, func() bool {
			var err error
			pending, err = c.metric(b, "bucketops_apps_pending")
			return err == nil && pending == 0
		}) {
			t.Errorf("%s still has %.0f apps pending", b.name, pending)
		}
	}
	c.report(c.refreshes())
}

// Scenario 3: the GCS emulator is paused while bucketops push runs: the
// push completes once GCS is back within --timeout, or exits 1 with a
// clear message after it; never a half-written release, never two
// generations for one push.
func testGCSPaused(t *testing.T) {
	c := newCluster(t, options{})
	app := "team/paused"
	// want is each release's canonical stream, as the CLI assembles it.
	want := map[uint64][]byte{}
	dir := func(t *testing.T, seq uint64) string {
		d := filepath.Join(t.TempDir(), "rendered")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "configmap.yaml"), release(t, app, seq).Bytes, 0o644); err != nil {
			t.Fatal(err)
		}
		rel, err := render.AssembleDir(d)
		if err != nil {
			t.Fatal(err)
		}
		want[seq] = rel.Bytes
		return d
	}
	// push runs in any goroutine: it only reports.
	push := func(d string, seq uint64, timeout time.Duration) cliRun {
		return c.runCLI(t.Context(), "push", app, d, "--sequence", fmt.Sprint(seq), "--timeout", timeout.String(), "-o", "json")
	}
	if r := push(dir(t, 1), 1, 30*time.Second); r.code != 0 {
		t.Fatalf("first push: exit %d: %s", r.code, r.stderr)
	}

	t.Run("back_within_timeout", func(t *testing.T) {
		d := dir(t, 2)
		c.pause(c.gcs)
		done := make(chan cliRun, 1)
		start := time.Now()
		go func() { done <- push(d, 2, 60*time.Second) }()
		time.Sleep(5 * time.Second)
		select {
		case r := <-done:
			c.unpause(c.gcs)
			t.Fatalf("push returned while GCS was paused: exit %d: %s", r.code, r.stderr)
		default:
		}
		c.unpause(c.gcs)
		r := <-done
		if r.code != 0 {
			t.Fatalf("push after GCS came back: exit %d: %s", r.code, r.stderr)
		}
		t.Logf("push completed %s after it started, 5 s of it paused", time.Since(start).Round(100*time.Millisecond))
		var res struct {
			Generation int64 `json:"generation"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("push -o json: %v: %q", err, r.stdout)
		}
		c.checkHistory(app, want, 2)
		if head := c.head(app); head.Generation != res.Generation {
			t.Errorf("push reported generation %d, the head is %s", res.Generation, head.Ref())
		}
	})

	t.Run("gives_up_at_timeout", func(t *testing.T) {
		d := dir(t, 3)
		c.pause(c.gcs)
		start := time.Now()
		r := push(d, 3, 5*time.Second)
		took := time.Since(start)
		c.unpause(c.gcs)
		if r.code != 1 {
			t.Fatalf("push against a paused GCS: exit %d, want 1: %s", r.code, r.stderr)
		}
		t.Logf("push gave up after %s: %s", took.Round(100*time.Millisecond), strings.TrimSpace(r.stderr))
		if !strings.Contains(r.stderr, "--timeout") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("want one line that names --timeout, got %q", r.stderr)
		}
		// The write may have reached GCS before the CLI gave up (as
		// with GCS itself): then it is whole. Pushing again is the
		// remedy, and it never makes a second generation.
		if r := push(d, 3, 30*time.Second); r.code != 0 {
			t.Fatalf("the same push again: exit %d: %s", r.code, r.stderr)
		}
		c.checkHistory(app, want, 3)
	})
}

// checkHistory fails unless app's history holds exactly one generation of
// each of the releases 1..n, each read back whole (the store checks the
// digest) with the bytes of want.
func (c *cluster) checkHistory(app string, want map[uint64][]byte, n uint64) {
	c.t.Helper()
	ctx := c.t.Context()
	hist, err := c.store.History(ctx, app, store.HistoryOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, r := range hist {
		seen[r.Sequence]++
		_, data, err := c.store.Read(ctx, r.Ref())
		if err != nil {
			c.t.Errorf("%s: %v", r.Ref(), err)
			continue
		}
		if !slices.Equal(data, want[r.Sequence]) {
			c.t.Errorf("%s (sequence %d) holds other bytes than its push sent", r.Ref(), r.Sequence)
		}
	}
	for seq, k := range seen {
		if seq < 1 || seq > n {
			c.t.Errorf("%s has a generation of sequence %d, which no push completed", app, seq)
		}
		if k > 1 {
			c.t.Errorf("%s has %d generations of sequence %d: one push wrote twice", app, k, seq)
		}
	}
	for seq := uint64(1); seq <= n; seq++ {
		if seen[seq] == 0 {
			c.t.Errorf("%s has no generation of sequence %d", app, seq)
		}
	}
}

// Scenario 4: a replica cut off from GCS's network turns unready, fails
// renders closed with a clear error, and recovers when the network returns.
func testPartition(t *testing.T) {
	apps := []string{"team/cut-off"}
	c := newCluster(t, options{replicas: 1, poll: 2 * time.Second, apps: apps})
	b := c.bridges[0]
	app := apps[0]
	if _, err := c.publish(t.Context(), app, 1); err != nil {
		t.Fatal(err)
	}
	manifests := "/v1/apps/" + app + "/-/manifests"
	if code, body := c.get(b, manifests); code != 200 || !strings.Contains(body, `release: "1"`) {
		t.Fatalf("render before the cut: %d %s", code, body)
	}

	c.disconnect(b)
	var last string
	if !eventually(30*time.Second, func() bool {
		code, body := c.get(b, "/readyz")
		last = fmt.Sprintf("%d %s", code, body)
		return code == 503
	}) {
		t.Fatalf("/readyz still ready while cut off from GCS: %s", last)
	}
	t.Logf("/readyz while cut off: %s", oneLine(last))
	if code, body := c.get(b, "/healthz"); code != 200 {
		t.Errorf("/healthz while cut off: %d %s; liveness must not restart a replica for a partition", code, body)
	}
	// A new release while the replica can't see it.
	if _, err := c.publish(t.Context(), app, 2); err != nil {
		t.Fatal(err)
	}
	code, body := c.get(b, manifests)
	t.Logf("render while cut off: %d %s", code, oneLine(body))
	if code != 503 {
		t.Errorf("render while cut off: %d, want 503", code)
	}
	var e struct{ Error, Reason string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Reason != "bucket_unreachable" {
		t.Errorf("render while cut off: want a JSON error with reason bucket_unreachable, got %q", body)
	}
	if strings.Contains(body, "kind:") {
		t.Errorf("render while cut off returned manifests: %q", body)
	}

	c.reconnect(b)
	c.waitReady(b)
	if code, body := c.get(b, manifests); code != 200 || !strings.Contains(body, `release: "2"`) {
		t.Fatalf("render after the network returned: %d %s", code, body)
	}
	c.waitRefreshed(c.heads(apps), 30*time.Second)
}

// Scenario 5: the Pub/Sub emulator restarts: the releases published while
// it was down are found by polling, and the replica pulls again after.
func testPubsubRestart(t *testing.T) {
	apps := appNames(5)
	c := newCluster(t, options{replicas: 1, poll: 5 * time.Second, apps: apps})
	b := c.bridges[0]
	ctx := t.Context()
	for _, app := range apps {
		if _, err := c.publish(ctx, app, 1); err != nil {
			t.Fatal(err)
		}
	}
	c.waitRefreshed(c.heads(apps), 30*time.Second)
	polledBefore, err := c.metric(b, "bucketops_events_total", `source="poll"`, `outcome="accepted"`)
	if err != nil {
		t.Fatal(err)
	}

	stop := 10 * time.Second
	if err := c.pubsub.Stop(ctx, &stop); err != nil {
		t.Fatalf("stop Pub/Sub: %v", err)
	}
	for _, app := range apps {
		if _, err := c.publish(ctx, app, 2); err != nil {
			t.Fatal(err)
		}
	}
	// fake-gcs-server gives up publishing a notification after 10 s: past
	// that, these releases' notifications are lost for good.
	time.Sleep(12 * time.Second)
	if err := c.pubsub.Start(ctx); err != nil {
		t.Fatalf("start Pub/Sub again: %v", err)
	}
	c.waitRefreshed(c.heads(apps), 30*time.Second)
	polled, err := c.metric(b, "bucketops_events_total", `source="poll"`, `outcome="accepted"`)
	if err != nil {
		t.Fatal(err)
	}
	if polled-polledBefore < float64(len(apps)) {
		t.Errorf("polling found %.0f of the %d releases published while Pub/Sub was down, whose notifications were lost", polled-polledBefore, len(apps))
	}

	// The replica is subscribed again: new notifications arrive by pull.
	before, err := c.metric(b, "bucketops_events_total", `source="pull"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.publish(ctx, apps[0], 3); err != nil {
		t.Fatal(err)
	}
	var after float64
	restarted := time.Now()
	// The Pub/Sub client retries its stream with its own back-off too:
	// seen between 7 and 56 s here.
	if !eventually(3*time.Minute, func() bool {
		after, _ = c.metric(b, "bucketops_events_total", `source="pull"`)
		return after > before
	}) {
		t.Fatalf("%s pulled nothing after Pub/Sub restarted (%.0f pulled events before and after)", b.name, before)
	}
	t.Logf("%s pulled again %s after the release that followed the restart", b.name, time.Since(restarted).Round(100*time.Millisecond))
	t.Logf("pulled events: %.0f before Pub/Sub restarted, %.0f after; %.0f releases of the gap found by polling", before, after, polled-polledBefore)
	c.waitRefreshed(c.heads(apps), 30*time.Second)
}

// oneLine folds a JSON body onto one line for the test's log.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
