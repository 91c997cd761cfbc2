package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/api/option"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/webhook"
)

const testReaderToken = "reader-token-0123456789abcdef"

// deployRig is the CLI's bucket (the local-mode emulator), a bridge over
// it with a deployer (--sync) and a fake Argo CD whose hard refresh
// fetches the manifests from the bridge as the plugin does.
type deployRig struct {
	argo   *argocdtest.Server
	bridge string
}

func startDeployRig(t *testing.T) *deployRig {
	t.Helper()
	emu := startBucket(t)
	client, err := storage.NewClient(t.Context(), option.WithEndpoint(emu.URL()+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	st := store.New(client, store.Location{Bucket: emu.Bucket()}, slog.New(slog.DiscardHandler))
	argo := argocdtest.New(t)
	reg := prometheus.NewRegistry()
	view, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(deploy.Config{
		Releases: st, Revisions: view, Logger: slog.New(slog.DiscardHandler), Registry: reg, Sync: true,
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
	go d.Poll(ctx, time.Second) // stands in for the bucket's notifications
	t.Cleanup(func() {
		cancel()
		<-done
	})
	dec, err := secrets.NewDecrypter(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webhook.New(webhook.Config{
		Releases: st, Renderer: dec, Logger: slog.New(slog.DiscardHandler), Registry: reg,
		Tokens:  []webhook.Token{webhook.NewToken(webhook.RolePlugin, testPluginToken), webhook.NewToken(webhook.RoleReader, testReaderToken)},
		Deploys: d, Location: st.Location(), Git: view.Handler(),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes())
	t.Cleanup(hs.Close)
	// The Application follows the app's git view; Argo CD resolves main
	// with go-git, the reader token as the repository's password.
	a := argocdtest.PluginApp("payments", "", "prod/payments")
	a.Spec.Source.RepoURL, a.Spec.Source.TargetRevision = hs.URL+"/git/prod/payments.git", "main"
	argo.Put(a)
	argo.Resolve(argocdtest.LsRemote("argocd", testReaderToken))
	tokenFile := filepath.Join(t.TempDir(), "reader")
	if err := os.WriteFile(tokenFile, []byte(testReaderToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUCKETOPS_BRIDGE", hs.URL)
	t.Setenv("BUCKETOPS_TOKEN_FILE", tokenFile)

	r := &deployRig{argo: argo, bridge: hs.URL}
	// A refresh that resolved a new revision leaves the Application out of
	// sync, for the bridge's --sync.
	argo.OnRefresh(func(a *v1alpha1.Application) {
		now := metav1.Now()
		a.Status.ReconciledAt = &now
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
	})
	return r
}

func TestPushWaitDeployed(t *testing.T) {
	startDeployRig(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	r := bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "30s")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "published prod/payments@") || !strings.Contains(r.stdout, "deployed prod/payments@") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	// Not a terminal: plain progress lines on stderr.
	if strings.Contains(r.stderr, "\r") || !strings.Contains(r.stderr, "prod/payments@") {
		t.Errorf("stderr:\n%q", r.stderr)
	}

	// wait on a generation already deployed answers at once, in JSON too.
	out := decode[map[string]any](t, bucketops(t, "", "wait", "prod/payments", "-o", "json").must(t).stdout)
	if out["state"] != "deployed" || out["deployed"] != true {
		t.Errorf("wait -o json: %v", out)
	}
}

func TestPushWaitFailed(t *testing.T) {
	rig := startDeployRig(t)
	rig.argo.OnSync(func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
		now := metav1.Now()
		a.Status.OperationState = &v1alpha1.OperationState{
			Phase: synccommon.OperationFailed, StartedAt: now, FinishedAt: &now,
			Message: `one or more objects failed to apply, reason: ConfigMap "Bad_Name" is invalid`,
		}
		a.Status.Health.Status = health.HealthStatusMissing
		return nil
	})
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	r := bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "30s")
	if r.code != 5 {
		t.Fatalf("exit %d, want 5\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, `ConfigMap "Bad_Name" is invalid`) {
		t.Errorf("stderr lacks Argo CD's message:\n%s", r.stderr)
	}
}

func TestPushWaitTimesOut(t *testing.T) {
	rig := startDeployRig(t)
	// Argo CD never gets to compare the release (it can't reach the git
	// view, say).
	rig.argo.Resolve(nil)
	rig.argo.OnRefresh(func(a *v1alpha1.Application) {})
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	r := bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "3s")
	if r.code != 5 {
		t.Fatalf("exit %d, want 5\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "not deployed after 3s") || !strings.Contains(r.stderr, "still pending") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	// The release was published all the same.
	if !strings.Contains(r.stdout, "published prod/payments@") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
}

func TestWaitErrors(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})

	// Settings are checked before anything is published.
	t.Setenv("BUCKETOPS_BRIDGE", "")
	r := bucketops(t, "", "push", "prod/payments", dir, "--wait")
	if r.code != 2 || !strings.Contains(r.stderr, "BUCKETOPS_BRIDGE") {
		t.Errorf("no bridge: exit %d, %s", r.code, r.stderr)
	}
	if r := bucketops(t, "", "ls", "-o", "json"); strings.Contains(r.stdout, "prod/payments") {
		t.Error("push --wait without a bridge published anyway")
	}

	// A token the bridge refuses (the plugin's, here): exit 1 at once, not
	// a timeout. (A bridge without Argo CD answers no_argocd the same way.)
	startAPI(t)
	r = bucketops(t, "", "wait", "prod/payments", "--wait-timeout", "1m")
	if r.code != 1 || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("plugin token: exit %d, %s", r.code, r.stderr)
	}
	if r := bucketops(t, "", "wait", "prod/payments", "--generation", "-1"); r.code != 2 {
		t.Errorf("negative generation: exit %d", r.code)
	}
}

// TestWaitOnAPinnedApp: an Application pinned to a release by its commit
// won't deploy a newer one; wait says so at once (exit 5) rather than
// waiting out its timeout.
func TestWaitOnAPinnedApp(t *testing.T) {
	rig := startDeployRig(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "30s").must(t)
	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/payments", "-o", "json").must(t).stdout)
	rig.argo.Update("", "payments", func(a *v1alpha1.Application) { a.Spec.Source.TargetRevision = log[0]["commit"].(string) })
	dir = writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "2")})
	r := bucketops(t, "", "push", "prod/payments", dir, "--wait", "--wait-timeout", "1m")
	if r.code != 5 || !strings.Contains(r.stderr, "pinned to generation") {
		t.Errorf("exit %d, want 5 naming the pin:\n%s", r.code, r.stderr)
	}
}
