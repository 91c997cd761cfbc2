package appset_test

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/bucketops/bucketops/appset"
	"github.com/bucketops/bucketops/logtest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

func applicationSet(name string, generators ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "ApplicationSet",
		"metadata":   map[string]any{"name": name, "namespace": "argocd"},
		"spec":       map[string]any{"generators": generators},
	}}
}

func pluginGenerator(configMap string) map[string]any {
	return map[string]any{"plugin": map[string]any{"configMapRef": map[string]any{"name": configMap}, "input": map[string]any{"parameters": map[string]any{"prefix": "prod"}}}}
}

// cluster holds ApplicationSets in client-go's fake dynamic client: the
// refresher's real calls (list, merge patch) run against its object
// tracker, as they would against the API server of the e2e tests.
type cluster struct {
	*dynamicfake.FakeDynamicClient
}

func newCluster(t *testing.T) cluster {
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{appset.Resource: "ApplicationSetList"},
		applicationSet("fleet", pluginGenerator("bucketops-generator")),
		applicationSet("nested", map[string]any{"matrix": map[string]any{"generators": []any{
			map[string]any{"clusters": map[string]any{}},
			pluginGenerator("bucketops-generator"),
		}}}),
		applicationSet("other-plugin", pluginGenerator("someone-else")),
		applicationSet("git", map[string]any{"git": map[string]any{"repoURL": "https://example.com/r.git"}}),
	)
	return cluster{c}
}

// refreshed returns the ApplicationSets carrying the refresh annotation,
// and removes it, as the ApplicationSet controller does after reconciling.
func (c cluster) refreshed(t *testing.T) map[string]bool {
	t.Helper()
	list, err := c.Resource(appset.Resource).Namespace("argocd").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, set := range list.Items {
		if set.GetAnnotations()[appset.RefreshAnnotation] == "true" {
			got[set.GetName()] = true
			set.SetAnnotations(nil)
			if _, err := c.Resource(appset.Resource).Namespace("argocd").Update(t.Context(), &set, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

func TestKubeRefreshesOnlyTheApplicationSetsUsingTheGenerator(t *testing.T) {
	c := newCluster(t)
	n, err := appset.Kube{Client: c, Namespace: "argocd", ConfigMap: "bucketops-generator"}.Refresh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := c.refreshed(t)
	if n != 2 || !got["fleet"] || !got["nested"] || len(got) != 2 {
		t.Errorf("refreshed %d: %v, want fleet and nested (the plugin inside a matrix)", n, got)
	}
	// Another namespace holds none of them.
	if n, err := (appset.Kube{Client: c, Namespace: "default", ConfigMap: "bucketops-generator"}).Refresh(t.Context()); err != nil || n != 0 {
		t.Errorf("namespace default: %d %v", n, err)
	}
}

// TestRefresherFollowsTheFleetsShape drives the refresher through what
// changes a fleet and what doesn't: a refresh must follow the first, and
// none the second.
func TestRefresherFollowsTheFleetsShape(t *testing.T) {
	b := storetest.New(t, true)
	s := b.Store(t, "")
	c := newCluster(t)
	release(t, s, "prod/payments", 1, map[string]string{"team": "payments"})

	logs := &logtest.Buffer{}
	r, err := appset.NewRefresher(appset.RefresherConfig{
		Releases: s, Sets: appset.Kube{Client: c, Namespace: "argocd", ConfigMap: "bucketops-generator"},
		Coalesce: 10 * time.Millisecond, Resync: time.Hour, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// waitRefresh waits for the refresh a change must bring. The refresher
	// annotates the ApplicationSets one after the other, and refreshed
	// clears what it sees, so a look between the two sees one: what each
	// look saw adds up.
	waitRefresh := func(why string) {
		t.Helper()
		seen := map[string]bool{}
		deadline := time.Now().Add(10 * time.Second)
		for {
			maps.Copy(seen, c.refreshed(t))
			if seen["fleet"] && seen["nested"] {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: ApplicationSets refreshed %v, want fleet and nested; the refresher's log:\n%s", why, seen, logs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// noRefresh waits until the refresher has read app's head twice, then
	// checks that nothing was patched: a refresh the first look asked for
	// runs before the refresher waits for the second.
	noRefresh := func(why, app string) {
		t.Helper()
		before := patches(c)
		for range 2 {
			seen := testutil.ToFloat64(r.Examined("unchanged"))
			r.Observe(app)
			deadline := time.Now().Add(10 * time.Second)
			for testutil.ToFloat64(r.Examined("unchanged")) == seen {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the refresher never looked; its log:\n%s", why, logs)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		if n := patches(c); n != before {
			t.Errorf("%s: %d ApplicationSets patched, want none", why, n-before)
		}
	}

	waitRefresh("start")

	release(t, s, "prod/web", 1, nil)
	r.Observe("prod/web")
	waitRefresh("a new app")

	release(t, s, "prod/web", 2, nil)
	noRefresh("a new release with the same labels", "prod/web")

	release(t, s, "prod/payments", 2, map[string]string{"team": "checkout"})
	r.Observe("prod/payments")
	waitRefresh("a label change")

	if _, err := s.Retire(t.Context(), "prod/web", store.Publication{Sequence: 3}); err != nil {
		t.Fatal(err)
	}
	r.Observe("prod/web")
	waitRefresh("a retirement")

	noRefresh("an event for an app with no release", "prod/nothing")

	release(t, s, "prod/web", 4, nil)
	r.Observe("prod/web")
	waitRefresh("a retired app published again")
}

func patches(c cluster) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}
