package webhook_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook/pushtest"
)

// Hole 6 of the review, through Pub/Sub push: an authenticated delivery
// naming a generation the bucket doesn't have is dropped, and the app's
// next release is still accepted and refreshed.
func TestAForgedPushDeliveryCannotFreezeAnApp(t *testing.T) {
	b := newDeployBridge(t)
	b.argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	token := b.issuer.Token(t, pushtest.Claims(pushAudience, pushAccount))
	first := b.publish(t, "prod/payments", configMap("c", "one"))
	outcome := func(body []byte) (string, string) {
		status, out := b.push(t, token, body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, out)
		}
		var got struct{ Outcome, Detail string }
		json.Unmarshal([]byte(out), &got)
		return got.Outcome, got.Detail
	}
	if got, detail := outcome(envelope(storetest.BucketName, "prod/payments/manifests.yaml", 1<<62)); got != "malformed" || !strings.Contains(detail, "its head is") {
		t.Errorf("a forged generation: %s %s, want malformed naming the real head", got, detail)
	}
	second := b.publish(t, "prod/payments", configMap("c", "two"))
	if got, _ := outcome(envelope(storetest.BucketName, "prod/payments/manifests.yaml", second.Generation)); got != "accepted" {
		t.Errorf("the next real release after a forged one: %s, want accepted", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h, _ := b.deployer.Handled("prod/payments"); h == second.Generation {
			break
		}
		if time.Now().After(deadline) {
			h, _ := b.deployer.Handled("prod/payments")
			t.Fatalf("handled generation %d, want %d (first was %d)", h, second.Generation, first.Generation)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
