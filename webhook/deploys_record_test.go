package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
)

// deploysAnswer is the part of GET /v1/apps/{app}/-/deploys the test reads.
type deploysAnswer struct {
	App          string                      `json:"app"`
	Applications []deploy.ApplicationDeploys `json:"applications"`
	Releases     []deploy.ReleaseDeploys     `json:"releases"`
	NextBefore   int64                       `json:"next_before"`
}

// The deploys route answers, for readers, what Argo CD's record says of
// each release: where and when it was live, or that it never was.
func TestDeploysRoute(t *testing.T) {
	b := newDeployBridge(t)
	a := argocdtest.PluginApp("payments", "", "prod/payments")
	a.Spec.Source.RepoURL, a.Spec.Source.TargetRevision = b.url+"/git/prod/payments.git", "main"
	b.argo.Put(a)
	// Argo CD records each successful sync in the Application's history.
	b.argo.OnSync(func(a *v1alpha1.Application, _ *application.ApplicationSyncRequest) error {
		argocdtest.Deployed(a, a.Status.Sync.Revision, time.Now().Add(-time.Second), time.Now())
		return nil
	})
	sync := func() {
		t.Helper()
		if _, err := b.argo.Client(t).Sync(t.Context(), &application.ApplicationSyncRequest{Name: ptr("payments")}); err != nil {
			t.Fatal(err)
		}
	}
	r1 := b.publish(t, "prod/payments", configMap("c", "one"))
	sync()
	r2 := b.publish(t, "prod/payments", configMap("c", "two"))
	r3 := b.publish(t, "prod/payments", configMap("c", "three"))
	sync()

	const path = "/v1/apps/prod/payments/-/deploys"
	if r := b.get(t, path, ""); r.status != 401 {
		t.Errorf("no token: %d", r.status)
	}
	if r := b.get(t, path, pluginToken); r.status != 403 {
		t.Errorf("plugin token: %d", r.status)
	}
	var got deploysAnswer
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := b.get(t, path, readerToken)
		if r.status == 200 {
			got = deploysAnswer{}
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Applications) == 1 && len(got.Applications[0].Deploys) == 2 {
				break
			}
		} else if r.status != 503 {
			t.Fatalf("%d: %s", r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record never showed both syncs: %d %s", r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := got.Applications[0].Deploys; d[0].Generation != r1.Generation || d[1].Generation != r3.Generation || d[0].Until == nil || d[1].Until != nil {
		t.Errorf("deploys %+v, want %d until %d's, then %d", d, r1.Generation, r3.Generation, r3.Generation)
	}
	verdicts := map[int64]deploy.Verdict{}
	for _, rel := range got.Releases {
		verdicts[rel.Generation] = rel.Verdict
	}
	want := map[int64]deploy.Verdict{r1.Generation: deploy.VerdictDeployed, r2.Generation: deploy.VerdictNeverDeployed, r3.Generation: deploy.VerdictDeployed}
	if fmt.Sprint(verdicts) != fmt.Sprint(want) {
		t.Errorf("verdicts %v, want %v", verdicts, want)
	}
	if s := got.Releases[0].Summary; len(s) != 1 || !strings.HasPrefix(s[0], "live on payments since ") {
		t.Errorf("the head's summary %q", s)
	}

	// Paged as the releases are.
	var page deploysAnswer
	if r := b.get(t, path+"?limit=2", readerToken); r.status != 200 || json.Unmarshal([]byte(r.body), &page) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if len(page.Releases) != 2 || page.NextBefore != r2.Generation {
		t.Errorf("first page: %d releases, next before %d, want 2 and %d", len(page.Releases), page.NextBefore, r2.Generation)
	}
	if r := b.get(t, fmt.Sprintf("%s?limit=2&before=%d", path, page.NextBefore), readerToken); r.status != 200 || json.Unmarshal([]byte(r.body), &page) != nil ||
		!slices.EqualFunc(page.Releases, []int64{r1.Generation}, func(x deploy.ReleaseDeploys, g int64) bool { return x.Generation == g }) || page.NextBefore != 0 {
		t.Errorf("second page: %+v", page)
	}
	for p, want := range map[string]string{
		path + "?limit=0":                 "invalid_parameter",
		path + "?before=x":                "invalid_parameter",
		"/v1/apps/prod/nothing/-/deploys": "app_not_found",
	} {
		if r := b.get(t, p, readerToken); r.reason(t) != want {
			t.Errorf("%s: %d %s, want %s", p, r.status, r.body, want)
		}
	}
}

func TestDeploysWithoutArgoCD(t *testing.T) {
	b := newBridge(t, nil)
	r := b.get(t, "/v1/apps/prod/payments/-/deploys", readerToken)
	if r.status != http.StatusNotImplemented || r.reason(t) != "no_argocd" {
		t.Errorf("%d %s, want 501 no_argocd", r.status, r.body)
	}
}
