package webhook_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook/pushtest"
)

// Hole 7 of the review: an unauthenticated request with a made-up token
// made the bridge fetch the issuer's keys every time. Forged tokens claim
// Google's issuer, our audience and service account (all public), and
// carry either a key ID nobody publishes or the real one with a bad
// signature: 100 of them cost at most one fetch beyond the first.
func TestForgedTokensDontMakeTheBridgeFetchKeys(t *testing.T) {
	b := newDeployBridge(t)
	body := envelope(storetest.BucketName, "prod/payments/manifests.yaml", 7)
	valid := b.issuer.Token(t, pushtest.Claims(pushAudience, pushAccount))
	if status, out := b.push(t, valid, body); status != http.StatusOK {
		t.Fatalf("a valid token: %d %s", status, out)
	}
	before := b.issuer.Fetches()
	stranger := pushtest.NewIssuer(t) // its key ID is unknown to the bridge
	parts := strings.Split(valid, ".")
	badSignature := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	var wg sync.WaitGroup
	for n := range 100 {
		wg.Go(func() {
			token := badSignature
			if n%2 == 0 {
				token = stranger.Token(t, pushtest.Claims(pushAudience, pushAccount))
			}
			if status, out := b.push(t, token, body); status != http.StatusUnauthorized {
				t.Errorf("a forged token: %d %s, want 401", status, out)
			}
		})
	}
	wg.Wait()
	if n := b.issuer.Fetches() - before; n > 1 {
		t.Errorf("100 forged tokens made the bridge fetch the key set %d times, want at most 1", n)
	}
	if status, out := b.push(t, valid, body); status != http.StatusOK {
		t.Errorf("a valid token after the forged ones: %d %s", status, out)
	}
}

// 403 answers go to whoever holds a Google token: they don't name the
// bridge's configured audience or service account.
func TestPushRefusalsDontNameTheConfiguration(t *testing.T) {
	b := newDeployBridge(t)
	body := envelope(storetest.BucketName, "prod/payments/manifests.yaml", 7)
	for name, claims := range map[string]map[string]any{
		"another audience":        pushtest.Claims("https://attacker.example.com/push", pushAccount),
		"another service account": pushtest.Claims(pushAudience, "attacker@evil.iam.gserviceaccount.com"),
	} {
		t.Run(name, func(t *testing.T) {
			status, out := b.push(t, b.issuer.Token(t, claims), body)
			if status != http.StatusForbidden {
				t.Fatalf("%d %s, want 403", status, out)
			}
			if strings.Contains(out, pushAudience) || strings.Contains(out, pushAccount) {
				t.Errorf("the refusal names the bridge's configuration: %s", out)
			}
		})
	}
}
