package argocdtest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bucketops/bucketops/deploy/argocdtest"
)

func TestTheFakeNeedsTheToken(t *testing.T) {
	s := argocdtest.New(t)
	s.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	if list, err := s.Client(t).List(t.Context(), &application.ApplicationQuery{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("List with the token: %v, %v", list, err)
	}
	wrong := s.ArgoCD(t)
	wrong.TokenFile = filepath.Join(t.TempDir(), "wrong")
	os.WriteFile(wrong.TokenFile, []byte("not-the-token"), 0o600)
	c, closer, err := wrong.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	_, err = c.List(t.Context(), &application.ApplicationQuery{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("List with a wrong token: %v, want Unauthenticated", err)
	}
}

func TestScriptedFailuresAndRecording(t *testing.T) {
	s := argocdtest.New(t)
	s.Put(argocdtest.PluginApp("payments", "", "prod/payments"))
	c := s.Client(t)
	hard, name := "hard", "payments"
	s.FailNext("get", codes.Unavailable, 1)
	if _, err := c.Get(t.Context(), &application.ApplicationQuery{Name: &name, Refresh: &hard}); status.Code(err) != codes.Unavailable {
		t.Fatalf("first refresh: %v, want Unavailable", err)
	}
	a, err := c.Get(t.Context(), &application.ApplicationQuery{Name: &name, Refresh: &hard})
	if err != nil || a.Status.ReconciledAt == nil {
		t.Fatalf("second refresh: %v, %v", a, err)
	}
	prune := true
	if _, err := c.Sync(t.Context(), &application.ApplicationSyncRequest{Name: &name, Prune: &prune}); err != nil {
		t.Fatal(err)
	}
	calls := s.Calls()
	if len(calls) != 2 || calls[0].Method != "refresh" || calls[1].Method != "sync" || !calls[1].Prune {
		t.Errorf("calls = %+v", calls)
	}
	if got := s.App("", "payments"); got.Status.Sync.Status != "Synced" || got.Status.Health.Status != "Healthy" {
		t.Errorf("after the default sync: %s, %s", got.Status.Sync.Status, got.Status.Health.Status)
	}
}
