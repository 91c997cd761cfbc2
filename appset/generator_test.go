package appset_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/argoproj/argo-cd/v2/applicationset/services/plugin"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bucketops/bucketops/appset"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

func release(t *testing.T, s *store.Store, app string, seq int, labels map[string]string) store.Result {
	t.Helper()
	data := fmt.Appendf(nil, "# Source: cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  n: %q\n", fmt.Sprint(seq))
	res, err := s.Publish(t.Context(), app, store.Publication{Data: data, Sequence: uint64(seq), Resources: 1, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fleet publishes prod/payments and prod/web (labelled), retires
// prod/old and publishes staging/payments.
func fleet(t *testing.T) (*storetest.Bucket, *store.Store, map[string]store.Result) {
	b := storetest.New(t, true)
	s := b.Store(t, "")
	res := map[string]store.Result{
		"prod/payments":    release(t, s, "prod/payments", 1, map[string]string{"team": "payments", "tier": "gold"}),
		"prod/web":         release(t, s, "prod/web", 1, map[string]string{"team": "web"}),
		"prod/old":         release(t, s, "prod/old", 1, nil),
		"staging/payments": release(t, s, "staging/payments", 1, nil),
	}
	if _, err := s.Retire(t.Context(), "prod/old", store.Publication{Sequence: 2}); err != nil {
		t.Fatal(err)
	}
	return b, s, res
}

// serve runs the generator the way Argo CD's plugin generator reaches it,
// and returns Argo CD's own plugin client for it.
func serve(t *testing.T, s *store.Store, gitURL string) (*httptest.Server, func(params map[string]any) (*plugin.ServiceResponse, error)) {
	g, err := appset.New(appset.Config{Releases: s, GitURL: gitURL})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(appset.Path, g)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func(params map[string]any) (*plugin.ServiceResponse, error) {
		svc, err := plugin.NewPluginService(t.Context(), "fleet", srv.URL, "token", 0)
		if err != nil {
			t.Fatal(err)
		}
		pp := v1alpha1.PluginParameters{}
		for k, v := range params {
			raw, _ := json.Marshal(v)
			pp[k] = apiextensionsv1.JSON{Raw: raw}
		}
		return svc.List(t.Context(), pp)
	}
}

func apps(resp *plugin.ServiceResponse) []string {
	var out []string
	for _, p := range resp.Output.Parameters {
		out = append(out, fmt.Sprint(p["app"]))
	}
	return out
}

func TestGeneratorListsLiveAppsUnderThePrefix(t *testing.T) {
	_, s, res := fleet(t)
	srv, list := serve(t, s, "")

	resp, err := list(map[string]any{"prefix": "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if got := apps(resp); fmt.Sprint(got) != "[prod/payments prod/web]" {
		t.Fatalf("prefix prod: %v, want the two live apps, the retired one left out", got)
	}
	p := resp.Output.Parameters[0]
	want := map[string]any{
		"app":            "prod/payments",
		"name":           appset.Name("prod/payments"),
		"repoURL":        srv.URL + "/git/prod/payments.git",
		"targetRevision": "main",
		"path":           ".",
		"generation":     fmt.Sprint(res["prod/payments"].Generation),
		"labels":         map[string]any{"team": "payments", "tier": "gold"},
	}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("entry\n%v\nwant\n%v", p, want)
	}

	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"prefix": ""}, "[prod/payments prod/web staging/payments]"},
		{map[string]any{"prefix": "prod/"}, "[prod/payments prod/web]"},
		{map[string]any{"prefix": "staging"}, "[staging/payments]"},
		{map[string]any{"prefix": "nothing"}, "[]"},
		{map[string]any{"prefix": "prod", "selector": "team=payments"}, "[prod/payments]"},
		{map[string]any{"prefix": "", "selector": "team"}, "[prod/payments prod/web]"},
		{map[string]any{"prefix": "", "selector": "!team"}, "[staging/payments]"},
		{map[string]any{"prefix": "prod", "selector": "team in (web,checkout),tier!=gold"}, "[prod/web]"},
	} {
		resp, err := list(tc.params)
		if err != nil {
			t.Errorf("%v: %v", tc.params, err)
			continue
		}
		if got := fmt.Sprint(apps(resp)); got != tc.want && !(got == "[]" && tc.want == "[]") {
			t.Errorf("%v: %s, want %s", tc.params, got, tc.want)
		}
	}

	// An app with no labels still has the key, so templates can index it.
	resp, _ = list(map[string]any{"prefix": "staging"})
	if l, ok := resp.Output.Parameters[0]["labels"].(map[string]any); !ok || len(l) != 0 {
		t.Errorf("labels of an unlabelled app: %#v, want {}", resp.Output.Parameters[0]["labels"])
	}
}

func TestGeneratorGitURL(t *testing.T) {
	_, s, _ := fleet(t)
	_, list := serve(t, s, "https://bridge.example.com/git/")
	resp, err := list(map[string]any{"prefix": "prod", "selector": "team=web"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Output.Parameters[0]["repoURL"]; got != "https://bridge.example.com/git/prod/web.git" {
		t.Errorf("repoURL %v", got)
	}
}

// TestGeneratorRefusesBadParameters checks each mistake is named in the
// error Argo CD shows in the ApplicationSet's conditions.
func TestGeneratorRefusesBadParameters(t *testing.T) {
	_, s, _ := fleet(t)
	_, list := serve(t, s, "")
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{}, "parameter prefix is missing"},
		{map[string]any{"prefix": "prod", "prefixes": "x"}, `unknown parameter "prefixes"`},
		{map[string]any{"prefix": 7}, "parameter prefix is 7, want a string"},
		{map[string]any{"prefix": "../etc"}, "parameter prefix"},
		{map[string]any{"prefix": "prod", "selector": "team in ("}, `parameter selector "team in ("`},
		{map[string]any{"prefix": "prod", "selector": map[string]any{"team": "web"}}, "parameter selector is"},
	} {
		_, err := list(tc.params)
		if err == nil || !strings.Contains(err.Error(), "status code 400") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a 400 saying %q", tc.params, err, tc.want)
		}
	}
}

// TestGeneratorFailsWholeWhenTheBucketFails: no partial list, which the
// controller would take as apps to delete.
func TestGeneratorFailsWholeWhenTheBucketFails(t *testing.T) {
	b, s, _ := fleet(t)
	_, list := serve(t, s, "")
	b.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":{"code":403,"message":"the bridge may not list"}}`))
		return true
	})
	resp, err := list(map[string]any{"prefix": "prod"})
	if err == nil || !strings.Contains(err.Error(), "status code 502") {
		t.Fatalf("%v %v, want a 502 and no output", resp, err)
	}
}

func TestName(t *testing.T) {
	seen := map[string]string{}
	for _, app := range []string{
		"prod/payments", "prod-payments", "prod/a_b", "prod/a.b", "prod/a-b", "prod-a/b",
		"payments", "p", strings.Repeat("a", 60) + "/x", strings.Repeat("a", 60) + "/y",
		strings.Repeat("abc/", 40) + "z", "team.x/app_1",
	} {
		name := appset.Name(app)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("Name(%q) = %q: %v", app, name, errs)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("Name(%q) = Name(%q) = %q", app, other, name)
		}
		seen[name] = app
		if appset.Name(app) != name {
			t.Errorf("Name(%q) is not stable", app)
		}
	}
	// The documented rule, frozen: Applications are named by it, and a
	// change would make the ApplicationSet replace every one.
	if got := appset.Name("prod/payments"); got != "prod-payments-8b4765c0" {
		t.Errorf("Name(prod/payments) = %q", got)
	}
}
