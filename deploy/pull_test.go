package deploy_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"cloud.google.com/go/storage"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

const (
	psProject      = "test-project"
	psTopic        = "projects/" + psProject + "/topics/releases"
	psSubscription = "projects/" + psProject + "/subscriptions/bridge"
)

// notifying is a bucket whose object events reach a pull subscription, as
// in production: the bucket's notification config publishes to a topic of
// pstest, found by fakestorage through PUBSUB_EMULATOR_HOST.
type notifying struct {
	bucket *storetest.Bucket
	store  *store.Store
	client *pubsub.Client
	sub    *pubsub.Subscriber
}

func newNotifying(t testing.TB) *notifying {
	t.Helper()
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	ctx := context.Background()
	client, err := pubsub.NewClient(ctx, psProject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: psTopic}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: psSubscription, Topic: psTopic, AckDeadlineSeconds: 10}); err != nil {
		t.Fatal(err)
	}
	b := storetest.New(t, true)
	if _, err := b.Client.Bucket(storetest.BucketName).AddNotification(ctx, &storage.Notification{
		TopicProjectID: psProject, TopicID: "releases", PayloadFormat: storage.JSONPayload,
		EventTypes: []string{storage.ObjectFinalizeEvent},
	}); err != nil {
		t.Fatal(err)
	}
	return &notifying{bucket: b, store: b.Store(t, ""), client: client, sub: client.Subscriber(psSubscription)}
}

// receive runs the deployer's pull loop until the test ends.
func (n *notifying) receive(t testing.TB, d *deploy.Deployer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Receive(ctx, n.sub, n.store.Location())
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestPullFromBucketNotifications(t *testing.T) {
	n := newNotifying(t)
	argo := argocdtest.New(t)
	const apps = 5
	for i := range apps {
		argo.Put(argocdtest.PluginApp(fmt.Sprintf("app-%d", i), "", fmt.Sprintf("prod/app-%d", i)))
	}
	r := newRig(t, argo, n.store, nil)
	n.receive(t, r.deployer)

	// Releases, and objects of other kinds in the same bucket.
	newest := map[string]int64{}
	for round := range 4 {
		for i := range apps {
			app := fmt.Sprintf("prod/app-%d", i)
			newest[app] = publish(t, n.store, app, fmt.Sprint(round))
		}
	}
	n.bucket.Put(t, "prod/app-0/README.md", []byte("not a release"), nil)
	for app, gen := range newest {
		waitHandled(t, r.deployer, app, gen)
	}
	for name, count := range refreshesOf(argo.Refreshes()) {
		if count > 4 {
			t.Errorf("%s refreshed %d times for 4 releases", name, count)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutilValue(r, "pull", "ignored") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the README's notification was never counted as ignored")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testutilValue(r *rig, source, outcome string) float64 {
	families, _ := r.registry.Gather()
	for _, f := range families {
		if f.GetName() != "bucketops_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["source"] == source && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// BenchmarkNotifyToRefresh measures what a user waits for between a release
// landing in the bucket and Argo CD being told: publish through the real
// client, fakestorage's notification to pstest, the bridge's pull
// subscription, the coalescing window (100 ms by default, as shipped), and
// the refresh call arriving at the fake Argo CD. It reports p50 and
// p99 in milliseconds.
func BenchmarkNotifyToRefresh(b *testing.B) {
	n := newNotifying(b)
	argo := argocdtest.New(b)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	d := newRig(b, argo, n.store, func(c *deploy.Config) { c.Coalesce = 100 * time.Millisecond }).deployer
	n.receive(b, d)
	ctx := context.Background()
	var samples []time.Duration
	for i := 0; b.Loop(); i++ {
		before := len(argo.Refreshes())
		start := time.Now()
		if _, err := n.store.Publish(ctx, "prod/payments", store.Publication{
			Data: []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  i: %q\n", fmt.Sprint(i))),
		}); err != nil {
			b.Fatal(err)
		}
		for len(argo.Refreshes()) == before {
			time.Sleep(time.Millisecond)
		}
		samples = append(samples, argo.Refreshes()[before].At.Sub(start))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	q := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
