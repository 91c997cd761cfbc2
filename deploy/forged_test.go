package deploy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store/storetest"
)

// Hole 6 of the review: one Pub/Sub message naming a huge generation used
// to become the app's newest generation, so every later notification (and
// poll) of that app was dropped as older until a restart. A notification
// is now checked against the bucket's head before it moves anything.
func TestAForgedNotificationCannotFreezeAnApp(t *testing.T) {
	n := newNotifying(t)
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	r := newRig(t, argo, n.store, nil)
	n.receive(t, r.deployer)
	first := publish(t, n.store, "prod/payments", "1")
	waitHandled(t, r.deployer, "prod/payments", first)

	// Anyone who may publish to the topic sends a notification for a
	// generation the bucket doesn't have.
	forged := int64(1) << 62
	res := n.client.Publisher(psTopic).Publish(context.Background(), &pubsub.Message{
		Attributes: map[string]string{
			"eventType": "OBJECT_FINALIZE", "bucketId": storetest.BucketName, "objectId": "prod/payments/manifests.yaml",
			"objectGeneration": fmt.Sprint(forged), "payloadFormat": "NONE",
		},
	})
	if _, err := res.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Real releases after it are refreshed through their notifications,
	// whichever order Pub/Sub delivers the three in.
	second := publish(t, n.store, "prod/payments", "2")
	third := publish(t, n.store, "prod/payments", "3")
	waitHandled(t, r.deployer, "prod/payments", third)
	if h, _ := r.deployer.Handled("prod/payments"); h != third {
		t.Errorf("handled generation %d, want the real head %d (after %d)", h, third, second)
	}
	deadline := time.Now().Add(15 * time.Second)
	for testutilValue(r, "pull", "forged") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the forged notification was never counted as forged")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
