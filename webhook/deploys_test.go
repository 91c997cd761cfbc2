package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
	"github.com/bucketops/bucketops/webhook/pushtest"
)

const (
	pushAudience = "https://bucketops.example.com/v1/pubsub/push"
	pushAccount  = "bucketops-push@example-project.iam.gserviceaccount.com"
)

// deployBridge is a bridge with a deployer talking to a fake Argo CD, and
// Pub/Sub push authenticated against a test issuer.
type deployBridge struct {
	*bridge
	argo     *argocdtest.Server
	deployer *deploy.Deployer
	issuer   *pushtest.Issuer
	registry *prometheus.Registry
}

func newDeployBridge(t *testing.T) *deployBridge {
	t.Helper()
	b := storetest.New(t, true)
	st := b.Store(t, "")
	argo := argocdtest.New(t)
	reg := prometheus.NewRegistry()
	view, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Argo CD resolves revisions from the bridge's git view, with the
	// reader token as the repository's password.
	argo.Resolve(argocdtest.LsRemote("argocd", readerToken))
	d, err := deploy.New(deploy.Config{
		Releases: st, Revisions: view, Logger: slog.New(slog.DiscardHandler), Registry: reg,
		Coalesce: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Connect: func() (application.ApplicationServiceClient, io.Closer, error) { return argo.ArgoCD(t).Connect() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	issuer := pushtest.NewIssuer(t)
	dec, err := secrets.NewDecrypter(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webhook.New(webhook.Config{
		Releases: st, Renderer: dec, Logger: slog.New(slog.DiscardHandler), Registry: reg,
		Tokens:  []webhook.Token{webhook.NewToken(webhook.RolePlugin, pluginToken), webhook.NewToken(webhook.RoleReader, readerToken)},
		Deploys: d, Location: st.Location(),
		Push: &webhook.PushAuth{Audience: pushAudience, ServiceAccount: pushAccount, Keys: issuer.KeySet(time.Minute)},
		Git:  view.Handler(),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes())
	t.Cleanup(hs.Close)
	return &deployBridge{
		bridge: &bridge{url: hs.URL, bucket: b, store: st},
		argo:   argo, deployer: d, issuer: issuer, registry: reg,
	}
}

// envelope is a push delivery for a finalized object.
func envelope(bucket, object string, generation int64) []byte {
	data, _ := json.Marshal(map[string]string{
		"kind": "storage#object", "name": object, "bucket": bucket,
		"generation": fmt.Sprint(generation), "updated": time.Now().UTC().Format(time.RFC3339Nano),
	})
	body, _ := json.Marshal(map[string]any{
		"message": map[string]any{
			"attributes": map[string]string{
				"eventType": "OBJECT_FINALIZE", "bucketId": bucket, "objectId": object,
				"objectGeneration": fmt.Sprint(generation), "payloadFormat": "JSON_API_V1",
			},
			"data":      base64.StdEncoding.EncodeToString(data),
			"messageId": "1",
		},
		"subscription": "projects/example-project/subscriptions/bucketops-bridge-push",
	})
	return body
}

func (b *deployBridge) push(t *testing.T, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url+"/v1/pubsub/push", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func TestPubsubPushAuthentication(t *testing.T) {
	b := newDeployBridge(t)
	valid := pushtest.Claims(pushAudience, pushAccount)
	with := func(k string, v any) map[string]any {
		c := pushtest.Claims(pushAudience, pushAccount)
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	other := pushtest.NewIssuer(t)
	body := envelope(storetest.BucketName, "prod/payments/manifests.yaml", 7)
	hour := time.Hour

	tests := []struct {
		name   string
		token  string
		status int
		reason string
	}{
		{"valid", b.issuer.Token(t, valid), 200, ""},
		{"issuer without scheme", b.issuer.Token(t, with("iss", "accounts.google.com")), 200, ""},
		{"no token", "", 401, "unauthenticated"},
		{"garbage", "not.a.jwt", 401, "unauthenticated"},
		{"signed by another key", other.Token(t, valid), 401, "unauthenticated"},
		{"HS256 with the public key", b.issuer.TokenWithAlg(t, jose.HS256, b.issuer.PublicKeyPEM(t), valid), 401, "unauthenticated"},
		{"alg none", unsigned(valid), 401, "unauthenticated"},
		{"expired", b.issuer.Token(t, with("exp", time.Now().Add(-hour).Unix())), 401, "unauthenticated"},
		{"issued in the future", b.issuer.Token(t, with("iat", time.Now().Add(hour).Unix())), 401, "unauthenticated"},
		{"other issuer", b.issuer.Token(t, with("iss", "https://evil.example.com")), 401, "unauthenticated"},
		{"other audience", b.issuer.Token(t, with("aud", "https://other.example.com")), 403, "forbidden"},
		{"other service account", b.issuer.Token(t, with("email", "attacker@evil.iam.gserviceaccount.com")), 403, "forbidden"},
		{"email not verified", b.issuer.Token(t, with("email_verified", false)), 403, "forbidden"},
		{"email_verified missing", b.issuer.Token(t, with("email_verified", nil)), 403, "forbidden"},
		{"email_verified a string", b.issuer.Token(t, with("email_verified", "true")), 403, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := b.push(t, tt.token, body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, out)
			}
			if tt.token != "" && strings.Contains(out, tt.token) {
				t.Error("the answer contains the token")
			}
			if tt.reason != "" {
				if r := (response{status: status, body: out}).reason(t); r != tt.reason {
					t.Errorf("reason %q, want %q", r, tt.reason)
				}
			}
		})
	}
}

// unsigned is a token with alg none: header.payload. and no signature.
func unsigned(claims map[string]any) string {
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	payload, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(header) + "." + enc.EncodeToString(payload) + "."
}

func TestPubsubPushDeliveries(t *testing.T) {
	b := newDeployBridge(t)
	b.argo.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	token := b.issuer.Token(t, pushtest.Claims(pushAudience, pushAccount))
	res := b.publish(t, "prod/payments", configMap("c", "one"))

	tests := []struct {
		name    string
		body    []byte
		outcome string
	}{
		{"a release", envelope(storetest.BucketName, "prod/payments/manifests.yaml", res.Generation), "accepted"},
		{"the same again", envelope(storetest.BucketName, "prod/payments/manifests.yaml", res.Generation), "duplicate"},
		{"an older generation", envelope(storetest.BucketName, "prod/payments/manifests.yaml", res.Generation-1), "duplicate"},
		{"another bucket", envelope("someone-elses", "prod/payments/manifests.yaml", res.Generation+1), "ignored"},
		{"not a release object", envelope(storetest.BucketName, "prod/payments/README.md", res.Generation+1), "ignored"},
		{"not JSON", []byte("{"), "malformed"},
		{"no message", []byte(`{"subscription":"x"}`), "malformed"},
		{"no attributes", []byte(`{"message":{"data":"e30="}}`), "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every authenticated delivery is acknowledged: redelivery
			// couldn't change the answer.
			status, out := b.push(t, token, tt.body)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", status, out)
			}
			var got struct{ Outcome string }
			json.Unmarshal([]byte(out), &got)
			if got.Outcome != tt.outcome {
				t.Errorf("outcome %q, want %q (%s)", got.Outcome, tt.outcome, out)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(b.argo.Refreshes()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the accepted delivery never became a refresh")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(b.argo.Refreshes()); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

func TestDeployStatusRoute(t *testing.T) {
	b := newDeployBridge(t)
	a := argocdtest.PluginApp("payments", "", "prod/payments")
	a.Spec.Source.RepoURL, a.Spec.Source.TargetRevision = b.url+"/git/prod/payments.git", "main"
	b.argo.Put(a)
	res := b.publish(t, "prod/payments", configMap("c", "one"))
	statusPath := fmt.Sprintf("/v1/apps/prod/payments/-/status?generation=%d", res.Generation)

	// Only reader tokens.
	if r := b.get(t, statusPath, ""); r.status != 401 {
		t.Errorf("no token: %d", r.status)
	}
	if r := b.get(t, statusPath, pluginToken); r.status != 403 {
		t.Errorf("plugin token: %d", r.status)
	}

	state := func() deploy.Status {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := b.get(t, statusPath, readerToken)
			if r.status == 200 {
				var st deploy.Status
				if err := json.Unmarshal([]byte(r.body), &st); err != nil {
					t.Fatal(err)
				}
				if len(st.Applications) == 1 {
					return st
				}
			} else if r.status != 503 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no status with the Application: %d %s", r.status, r.body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if st := state(); st.State != deploy.StatePending {
		t.Fatalf("before Argo CD fetched it: %+v", st)
	}

	// What a request says of an Application is not trusted: a manifest
	// request naming "payments" changes nothing.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+"/v1/apps/prod/payments/-/manifests", nil)
	req.Header.Set("Authorization", "Bearer "+pluginToken)
	req.Header.Set(webhook.HeaderApplication, "payments")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := state(); st.State != deploy.StatePending {
		t.Fatalf("after a manifest request naming the Application: %+v, want still pending", st)
	}
	// Argo CD refreshes: it resolves main through the git view, and the
	// default sync makes it deployed.
	normal := "normal"
	if _, err := b.argo.Client(t).Get(t.Context(), &application.ApplicationQuery{Name: ptr("payments"), Refresh: &normal}); err != nil {
		t.Fatal(err)
	}
	// The bridge learns of the refresh through its watch of Applications,
	// so the comparison shows up shortly after the call returns.
	compared := time.Now().Add(10 * time.Second)
	for st := state(); st.Applications[0].Compared != res.Generation; st = state() {
		if time.Now().After(compared) {
			t.Fatalf("compared %d, want %d: %+v", st.Applications[0].Compared, res.Generation, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = b.argo.Client(t).Sync(t.Context(), &application.ApplicationSyncRequest{Name: ptr("payments")})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st := state(); st.State != deploy.StateDeployed; st = state() {
		if time.Now().After(deadline) {
			t.Fatalf("after a successful sync: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}

	for path, want := range map[string]string{
		"/v1/apps/prod/payments/-/status?generation=x":                                 "invalid_parameter",
		fmt.Sprintf("/v1/apps/prod/payments/-/status?generation=%d", res.Generation+1): "generation_not_found",
		"/v1/apps/prod/nothing/-/status":                                               "app_not_found",
	} {
		r := b.get(t, path, readerToken)
		if got := r.reason(t); got != want {
			t.Errorf("%s: %d %s, want %s", path, r.status, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestStatusWithoutArgoCD(t *testing.T) {
	b := newBridge(t, nil)
	r := b.get(t, "/v1/apps/prod/payments/-/status", readerToken)
	if r.status != http.StatusNotImplemented || r.reason(t) != "no_argocd" {
		t.Errorf("%d %s, want 501 no_argocd", r.status, r.body)
	}
	// And no push route.
	req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/pubsub/push", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("push route without push configured: %d", resp.StatusCode)
	}
}
