package deploy_test

import (
	"testing"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/gitview"
)

// An Application names its app by a plugin parameter, the plugin's env,
// its app's own git view repository, or its branch of a fleet repository;
// the bridge refreshes and reports on exactly that app.
func TestAppOfEveryWayAnApplicationNamesItsApp(t *testing.T) {
	str := func(s string) *string { return &s }
	src := func(repoURL, rev string) *v1alpha1.ApplicationSource {
		return &v1alpha1.ApplicationSource{RepoURL: repoURL, TargetRevision: rev, Plugin: &v1alpha1.ApplicationSourcePlugin{Name: deploy.PluginName}}
	}
	param := src("https://bridge/git/-/fleet.git", gitview.FleetRevision("prod/other"))
	param.Plugin.Parameters = v1alpha1.ApplicationSourcePluginParameters{{Name: "app", String_: str("prod/payments")}}
	for _, tc := range []struct {
		name   string
		source *v1alpha1.ApplicationSource
		app    string
	}{
		{"plugin parameter first", param, "prod/payments"},
		{"app repository", src("https://bridge/git/prod/payments.git", "main"), "prod/payments"},
		{"fleet repository", src(gitview.FleetURL("https://bridge/git", ""), gitview.FleetRevision("prod/payments")), "prod/payments"},
		{"prefix's fleet repository", src(gitview.FleetURL("https://bridge/git", "prod"), "refs/heads/prod/payments/-"), "prod/payments"},
		{"fleet repository, not an app's branch", src(gitview.FleetURL("https://bridge/git", ""), "main"), ""},
		{"another plugin", &v1alpha1.ApplicationSource{RepoURL: "https://bridge/git/prod/payments.git", Plugin: &v1alpha1.ApplicationSourcePlugin{Name: "other"}}, ""},
	} {
		a := &v1alpha1.Application{Spec: v1alpha1.ApplicationSpec{Source: tc.source}}
		app, ok := deploy.AppOf(a)
		if app != tc.app || ok != (tc.app != "") {
			t.Errorf("%s: AppOf = %q, %v; want %q", tc.name, app, ok, tc.app)
		}
	}
}
