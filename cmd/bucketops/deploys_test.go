package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketops/bucketops/deploy/argocdtest"
)

// log --deploys shows, per release, where and when Argo CD ran it, from
// the bridge, which reads each Application's history.
func TestLogDeploys(t *testing.T) {
	rig := startDeployRig(t)
	fail := false
	rig.argo.OnSync(func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
		now := metav1.Now()
		op := &v1alpha1.OperationState{
			Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: a.Status.Sync.Revision}},
			Phase:     synccommon.OperationSucceeded, StartedAt: now, FinishedAt: &now,
			SyncResult: &v1alpha1.SyncOperationResult{Revision: a.Status.Sync.Revision},
		}
		if fail {
			op.Phase, op.Message = synccommon.OperationFailed, `ConfigMap "Bad_Name" is invalid`
			a.Status.OperationState = op
			return nil
		}
		a.Status.OperationState = op
		a.Status.Sync.Status, a.Status.Health.Status = v1alpha1.SyncStatusCodeSynced, health.HealthStatusHealthy
		argocdtest.Deployed(a, a.Status.Sync.Revision, now.Time, now.Time)
		return nil
	})
	for _, v := range []string{"1", "2"} {
		bucketops(t, "", "push", "prod/payments", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", v)}), "--wait", "--wait-timeout", "30s").must(t)
		time.Sleep(1100 * time.Millisecond) // Argo CD's times have whole seconds
	}
	fail = true
	if r := bucketops(t, "", "push", "prod/payments", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "3")}), "--wait", "--wait-timeout", "30s"); r.code != 5 {
		t.Fatalf("a failing sync: exit %d, want 5\n%s", r.code, r.stderr)
	}
	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/payments", "-o", "json").must(t).stdout)

	r := bucketops(t, "", "log", "prod/payments", "--deploys").must(t)
	t.Logf("log --deploys:\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "argocd/payments (2 of its last 10 deploys kept)") || !strings.HasPrefix(lines[1], "GENERATION") {
		t.Fatalf("log --deploys:\n%s", r.stdout)
	}
	for i, want := range []string{"sync failed on payments: ConfigMap \"Bad_Name\" is invalid", "live on payments since ", "live on payments from "} {
		if row := lines[2+i]; !strings.HasPrefix(row, fmtGen(log[i]["generation"])) || !strings.Contains(row, want) {
			t.Errorf("release %d: %q, want %q", i, row, want)
		}
	}

	out := decode[map[string]any](t, bucketops(t, "", "log", "prod/payments", "--deploys", "--limit", "2", "-o", "json").must(t).stdout)
	rels, _ := out["releases"].([]any)
	apps, _ := out["applications"].([]any)
	if len(rels) != 2 || len(apps) != 1 || rels[1].(map[string]any)["verdict"] != "deployed" || rels[0].(map[string]any)["verdict"] != "sync_failed" {
		t.Errorf("log --deploys -o json: %v", out)
	}

	if r := bucketops(t, "", "log", "prod/payments", "--deploys", "--as-of", "2026-01-01"); r.code != 2 {
		t.Errorf("--deploys with --as-of: exit %d", r.code)
	}
	t.Setenv("BUCKETOPS_BRIDGE", "")
	if r := bucketops(t, "", "log", "prod/payments", "--deploys"); r.code != 2 || !strings.Contains(r.stderr, "BUCKETOPS_BRIDGE") {
		t.Errorf("no bridge: exit %d, %s", r.code, r.stderr)
	}
}

func fmtGen(v any) string {
	f, _ := v.(float64)
	return strconv.FormatInt(int64(f), 10)
}
