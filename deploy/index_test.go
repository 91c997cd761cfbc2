package deploy_test

import (
	"testing"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"

	"github.com/bucketops/bucketops/deploy"
)

// An Application names its app by a plugin parameter, the plugin's env
// entry, or its app's git view repository, in that order; the bridge
// refreshes and reports on exactly that app.
func TestAppOfEveryWayAnApplicationNamesItsApp(t *testing.T) {
	str := func(s string) *string { return &s }
	src := func(repoURL, rev string) *v1alpha1.ApplicationSource {
		return &v1alpha1.ApplicationSource{RepoURL: repoURL, TargetRevision: rev, Plugin: &v1alpha1.ApplicationSourcePlugin{Name: deploy.PluginName}}
	}
	param := src("https://bridge/git/prod/other.git", "main")
	param.Plugin.Parameters = v1alpha1.ApplicationSourcePluginParameters{{Name: "app", String_: str("prod/payments")}}
	env := src("https://bridge/git/prod/other.git", "main")
	env.Plugin.Env = v1alpha1.Env{{Name: "BUCKETOPS_APP", Value: "prod/payments"}}
	for _, tc := range []struct {
		name   string
		source *v1alpha1.ApplicationSource
		app    string
	}{
		{"plugin parameter first", param, "prod/payments"},
		{"app repository", src("https://bridge/git/prod/payments.git", "main"), "prod/payments"},
		{"plugin env entry", env, "prod/payments"},
		{"a repository that is not the git view", src("https://github.com/acme/deploy.git", "main"), ""},
		{"another plugin", &v1alpha1.ApplicationSource{RepoURL: "https://bridge/git/prod/payments.git", Plugin: &v1alpha1.ApplicationSourcePlugin{Name: "other"}}, ""},
	} {
		a := &v1alpha1.Application{Spec: v1alpha1.ApplicationSpec{Source: tc.source}}
		app, ok := deploy.AppOf(a)
		if app != tc.app || ok != (tc.app != "") {
			t.Errorf("%s: AppOf = %q, %v; want %q", tc.name, app, ok, tc.app)
		}
	}
}
