//go:build e2e

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/appset"
)

// TestApplicationSet runs deploy/kubernetes/examples/applicationset.yaml
// (its prefix made fleet) on the real ApplicationSet controller: a fleet
// of apps becomes Applications routed by their labels, a new app gets
// its Application at once (the bridge's refresh, not the 30 min requeue),
// a retired one loses it and keeps its resources, and a label change
// moves an app.
func TestApplicationSet(t *testing.T) {
	const fleet = 30
	app := func(i int) string { return fmt.Sprintf("fleet/app-%02d", i) }
	ns := func(i int) string { return []string{"fleet-a", "fleet-b"}[i%2] }
	publish := func(t *testing.T, i int, namespace, value string) {
		t.Helper()
		dir := t.TempDir()
		// No namespace: the Application's destination, from the label, decides.
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-%02d\ndata:\n  value: %q\n", i, value)
		os.WriteFile(filepath.Join(dir, "configmap.yaml"), []byte(cm), 0o644)
		if out, errOut, code := st.bucketops("", "push", app(i), dir, "--label", "namespace="+namespace, "--label", "team=t"+fmt.Sprint(i%3)); code != 0 {
			t.Fatalf("push %s: exit %d\n%s%s", app(i), code, out, errOut)
		}
	}
	deployed := func(i int, namespace, value string) func() (bool, string) {
		return func() (bool, string) {
			d, err := st.kube.configMapData(namespace, fmt.Sprintf("settings-%02d", i))
			if err != nil {
				return false, err.Error()
			}
			return d["value"] == value, fmt.Sprintf("ConfigMap %s/settings-%02d value %q, want %q", namespace, i, d["value"], value)
		}
	}
	applicationExists := func(i int, want bool) func() (bool, string) {
		return func() (bool, string) {
			_, err := st.kube.application(appset.Name(app(i)))
			if err != nil && !isNotFound(err) {
				return false, err.Error()
			}
			return (err == nil) == want, fmt.Sprintf("Application %s exists: %v, want %v", appset.Name(app(i)), err == nil, want)
		}
	}

	for i := range fleet {
		publish(t, i, ns(i), "v1")
	}
	example, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "kubernetes", "examples", "applicationset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	set := strings.Replace(strings.Replace(string(example), "  name: prod\n", "  name: fleet\n", 1), "prefix: prod\n", "prefix: fleet\n", 1)
	if set == string(example) {
		t.Fatal("the example no longer has the name and prefix this test replaces")
	}
	start := time.Now()
	if err := st.kube.apply("/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets/fleet", []byte(set)); err != nil {
		t.Fatal(err)
	}
	for i := range fleet {
		eventually(t, "the fleet deployed", 5*time.Minute, deployed(i, ns(i), "v1"))
	}
	timings.add(fmt.Sprintf("ApplicationSet: %d apps deployed", fleet), time.Since(start))

	t.Run("a new app gets its Application at once", func(t *testing.T) {
		start := time.Now()
		publish(t, fleet, "fleet-a", "new")
		// requeueAfterSeconds is 1800: only the bridge's refresh makes this.
		eventually(t, "the new app's Application", 90*time.Second, applicationExists(fleet, true))
		eventually(t, "the new app deployed", 2*time.Minute, deployed(fleet, "fleet-a", "new"))
		timings.add("ApplicationSet: new app deployed", time.Since(start))
	})
	t.Run("a retired app loses its Application and keeps its resources", func(t *testing.T) {
		if out, errOut, code := st.bucketops("", "retire", app(3)); code != 0 {
			t.Fatalf("retire: exit %d\n%s%s", code, out, errOut)
		}
		eventually(t, "the retired app's Application deleted", 90*time.Second, applicationExists(3, false))
		if ok, detail := deployed(3, ns(3), "v1")(); !ok {
			t.Errorf("preserveResourcesOnDeletion: %s", detail)
		}
		if ok, detail := applicationExists(5, true)(); !ok {
			t.Errorf("another app: %s", detail)
		}
	})
	t.Run("a label change moves the app", func(t *testing.T) {
		publish(t, 4, "fleet-c", "v1")
		eventually(t, "the relabelled app deployed in its new namespace", 2*time.Minute, deployed(4, "fleet-c", "v1"))
	})
	t.Run("a new release flows through the generated Application", func(t *testing.T) {
		publish(t, 7, ns(7), "v2")
		eventually(t, "the new release deployed", 2*time.Minute, deployed(7, ns(7), "v2"))
	})
}
