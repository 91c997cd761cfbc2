package appset

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// RefreshAnnotation asks the ApplicationSet controller to reconcile an
// ApplicationSet now, generators included; the controller removes it.
const RefreshAnnotation = "argocd.argoproj.io/application-set-refresh"

// Resource is Argo CD's ApplicationSet resource.
var Resource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}

// Kube refreshes, through the Kubernetes API, the ApplicationSets in
// Namespace whose plugin generators (nested in matrix and merge generators
// too) name ConfigMap: the ones that use the bridge. It needs list and
// patch on applicationsets in that namespace, nothing else.
type Kube struct {
	Client    dynamic.Interface
	Namespace string
	ConfigMap string
}

// Refresh annotates every ApplicationSet that uses the generator and
// returns how many it did.
func (k Kube) Refresh(ctx context.Context) (int, error) {
	list, err := k.Client.Resource(Resource).Namespace(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list applicationsets in %s: %w", k.Namespace, err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, RefreshAnnotation)
	n := 0
	var errs []error
	for _, set := range list.Items {
		gens, _, _ := unstructured.NestedSlice(set.Object, "spec", "generators")
		if !usesConfigMap(gens, k.ConfigMap) {
			continue
		}
		if _, err := k.Client.Resource(Resource).Namespace(k.Namespace).Patch(ctx, set.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("annotate applicationset %s/%s: %w", k.Namespace, set.GetName(), err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// usesConfigMap reports whether any generator, nested ones included, is a
// plugin generator whose configMapRef names name.
func usesConfigMap(gens []any, name string) bool {
	for _, g := range gens {
		m, ok := g.(map[string]any)
		if !ok {
			continue
		}
		if plugin, ok := m["plugin"].(map[string]any); ok {
			if ref, ok := plugin["configMapRef"].(map[string]any); ok && ref["name"] == name {
				return true
			}
		}
		for _, combo := range []string{"matrix", "merge"} {
			if nested, ok, _ := unstructured.NestedSlice(m, combo, "generators"); ok && usesConfigMap(nested, name) {
				return true
			}
		}
	}
	return false
}
