package main

import (
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/deploy/argocdtest"
)

// argoRig is a bridge in local mode wired to a fake Argo CD built from Argo
// CD's own gRPC interfaces.
type argoRig struct {
	*bridgeProc
	argo *argocdtest.Server
	// token is local mode's bearer token, of both roles.
	token string
}

// startWithArgoCD starts a fake Argo CD holding one plugin Application for
// app, named for its last segment, that follows main in the app's git view
// as Argo CD resolves it (go-git's ls-remote with local mode's token), and
// a bridge in local mode that refreshes and syncs it (--sync) on the
// bucket's notifications alone (no polling). A refresh leaves the
// Application out of sync and a sync makes it Synced and Healthy, so
// push --wait exits 0.
func startWithArgoCD(t *testing.T, app string, args ...string) *argoRig {
	t.Helper()
	argo := argocdtest.New(t)
	name := path.Base(app)
	argo.Put(argocdtest.PluginApp(name, "", app))
	settings := argo.ArgoCD(t)
	b := startBridge(t, append([]string{"--argocd-server", settings.Server, "--argocd-token-file", settings.TokenFile,
		"--argocd-plaintext", "--sync", "--poll-interval", "0"}, args...)...)
	r := &argoRig{bridgeProc: b, argo: argo}
	for _, kv := range b.env {
		if file, ok := strings.CutPrefix(kv, "BUCKETOPS_TOKEN_FILE="); ok {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r.token = strings.TrimSpace(string(data))
		}
	}
	argo.Update("", name, func(a *v1alpha1.Application) {
		a.Spec.Source.RepoURL, a.Spec.Source.TargetRevision = b.url+"/git/"+app+".git", "main"
	})
	argo.Resolve(argocdtest.LsRemote("argocd", r.token))
	argo.OnRefresh(func(a *v1alpha1.Application) {
		now := metav1.Now()
		a.Status.ReconciledAt = &now
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
	})
	return r
}

// TestLocalModeNotifiesArgoCD runs the production path in local mode: the
// CLI publishes to the embedded bucket, whose notification reaches the
// in-process Pub/Sub, whose subscription the bridge pulls; the bridge
// refreshes and syncs the Application in a fake Argo CD, which resolves
// main through the bridge's git view with go-git and fetches the manifests
// as the plugin would; push --wait exits 0. Polling is off, so only the
// notification can have done it.
func TestLocalModeNotifiesArgoCD(t *testing.T) {
	r := startWithArgoCD(t, "dev/guestbook")
	b, argo, token := r.bridgeProc, r.argo, r.token
	served := make(chan string, 16)
	argo.OnRefresh(func(a *v1alpha1.Application) {
		req, _ := http.NewRequest(http.MethodGet, b.url+"/v1/apps/dev/guestbook/-/manifests", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Bucketops-Application", a.Name)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			served <- resp.Header.Get("X-Bucketops-Generation")
			resp.Body.Close()
		}
		now := metav1.Now()
		a.Status.ReconciledAt = &now
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
	})

	// push --wait with local mode's one token, which is also a reader.
	out := b.bucketops(t, configMap("1"), "push", "dev/guestbook", "-", "--wait", "--wait-timeout", "30s")
	if !strings.Contains(out, "deployed dev/guestbook@") {
		t.Fatalf("push --wait: %s", out)
	}
	select {
	case gen := <-served:
		if !strings.Contains(out, "@"+gen) {
			t.Errorf("Argo CD was served generation %s; push printed %s", gen, out)
		}
	case <-time.After(time.Second):
		t.Fatal("Argo CD never fetched the manifests")
	}
	if n := len(argo.Syncs()); n != 1 {
		t.Errorf("%d syncs, want 1", n)
	}
	b.stop(t)
	if !strings.Contains(b.stderr.String(), "pulling bucket notifications") {
		t.Errorf("the bridge didn't say it pulls notifications:\n%s", b.stderr)
	}
}

// TestBridgeWithoutArgoCDStillStarts: an unreachable Argo CD doesn't stop
// the bridge from serving manifests; the deployer keeps retrying.
func TestBridgeWithoutReachableArgoCD(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "argocd.token")
	os.WriteFile(tokenFile, []byte("x\n"), 0o600)
	b := startBridge(t, "--argocd-server", "127.0.0.1:1", "--argocd-token-file", tokenFile, "--argocd-plaintext")
	b.bucketops(t, configMap("1"), "push", "dev/x", "-")
	cmd := exec.Command(filepath.Join(binDir, "bucketops"), "plugin", "generate")
	cmd.Env = append(os.Environ(), append(b.env, "PARAM_APP=dev/x")...)
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "ConfigMap") {
		t.Fatalf("plugin generate with Argo CD down: %v %s", err, out)
	}
}

// TestLocalModePollingOnly: with the in-process Pub/Sub off, polling alone
// gets a release to Argo CD; local mode uses the token file it is given.
func TestLocalModePollingOnly(t *testing.T) {
	argo := argocdtest.New(t)
	argo.Put(argocdtest.PluginApp("guestbook", "", "dev/guestbook"))
	settings := argo.ArgoCD(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("a-token-for-both-roles-0123456789\n"), 0o600)
	b := startBridge(t, "--argocd-server", settings.Server, "--argocd-token-file", settings.TokenFile,
		"--argocd-plaintext", "--local-pubsub=false", "--poll-interval", "1s",
		"--token-file", "plugin="+tokenFile, "--token-file", "reader="+tokenFile)
	if !slices.Contains(b.env, "BUCKETOPS_TOKEN_FILE="+tokenFile) {
		t.Errorf("exports %v, want the given token file", b.env)
	}
	b.bucketops(t, configMap("1"), "push", "dev/guestbook", "-")
	deadline := time.Now().Add(20 * time.Second)
	for len(argo.Refreshes()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("polling never refreshed the Application")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.stop(t)
	if strings.Contains(b.stderr.String(), "pulling bucket notifications") {
		t.Error("the bridge pulled notifications with --local-pubsub=false")
	}
}
