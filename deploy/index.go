package deploy

import (
	"sort"
	"strings"
	"sync"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bucketops/bucketops/store"
)

// PluginName is the Config Management Plugin's name in plugin.yaml.
const PluginName = "bucketops"

// AppOf returns the bucketops app an Application's plugin source names:
// the plugin parameter app, else the plugin env entry BUCKETOPS_APP, else
// the app of the bridge's git view its repoURL points at (…/git/APP.git).
// An Application may have one source or several; the first bucketops source
// counts.
func AppOf(a *v1alpha1.Application) (string, bool) {
	s := bucketopsSource(a)
	if s == nil {
		return "", false
	}
	for _, param := range s.Plugin.Parameters {
		if param.Name == "app" && param.String_ != nil && *param.String_ != "" {
			return *param.String_, true
		}
	}
	for _, e := range s.Plugin.Env {
		if e != nil && e.Name == "BUCKETOPS_APP" && e.Value != "" {
			return e.Value, true
		}
	}
	return GitViewApp(s.RepoURL)
}

// GitViewApp returns the app a git view URL serves: …/git/APP.git.
func GitViewApp(repoURL string) (string, bool) {
	_, rest, ok := strings.Cut(repoURL, "/git/")
	for ok {
		if app, found := strings.CutSuffix(strings.TrimSuffix(rest, "/"), ".git"); found && store.ValidateApp(app) == nil {
			return app, true
		}
		_, rest, ok = strings.Cut(rest, "/git/")
	}
	return "", false
}

// bucketopsSource returns the Application's first source that uses the
// bucketops plugin.
func bucketopsSource(a *v1alpha1.Application) *v1alpha1.ApplicationSource {
	if a.Spec.Source != nil && isBucketops(a.Spec.Source.Plugin) {
		return a.Spec.Source
	}
	for i := range a.Spec.Sources {
		if isBucketops(a.Spec.Sources[i].Plugin) {
			return &a.Spec.Sources[i]
		}
	}
	return nil
}

// isBucketops reports whether a plugin is bucketops; a versioned plugin is
// called bucketops-<version>.
func isBucketops(p *v1alpha1.ApplicationSourcePlugin) bool {
	return p != nil && (p.Name == PluginName || strings.HasPrefix(p.Name, PluginName+"-"))
}

// appKey names an Application: its namespace and name.
type appKey struct{ Namespace, Name string }

func (k appKey) String() string { return k.Namespace + "/" + k.Name }

// index maps apps to the Applications that deploy them, with each
// Application's latest state as Argo CD's watch stream reported it.
type index struct {
	defaultNamespace string

	mu      sync.RWMutex
	ready   bool
	apps    map[appKey]*v1alpha1.Application
	appOf   map[appKey]string
	byApp   map[string]map[appKey]struct{}
	version uint64 // bumped on every change, for waiters in tests
}

func newIndex(defaultNamespace string) *index {
	return &index{
		defaultNamespace: defaultNamespace,
		apps:             map[appKey]*v1alpha1.Application{},
		appOf:            map[appKey]string{},
		byApp:            map[string]map[appKey]struct{}{},
	}
}

func (x *index) key(a *v1alpha1.Application) appKey {
	ns := a.Namespace
	if ns == "" {
		ns = x.defaultNamespace
	}
	return appKey{Namespace: ns, Name: a.Name}
}

// replace swaps the whole index for a fresh listing.
func (x *index) replace(items []v1alpha1.Application) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.apps = map[appKey]*v1alpha1.Application{}
	x.appOf = map[appKey]string{}
	x.byApp = map[string]map[appKey]struct{}{}
	for i := range items {
		x.putLocked(&items[i])
	}
	x.ready = true
	x.version++
}

// apply applies one watch event.
func (x *index) apply(typ watch.EventType, a *v1alpha1.Application) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if typ == watch.Deleted {
		x.removeLocked(x.key(a))
	} else {
		x.putLocked(a)
	}
	x.version++
}

// addIfAbsent adds a, an Application of a bucketops app, when the index
// has none of its key, and returns the app it deploys if it did.
func (x *index) addIfAbsent(a *v1alpha1.Application) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.apps[x.key(a)]; ok {
		return "", false
	}
	x.putLocked(a)
	app, ok := x.appOf[x.key(a)]
	if ok {
		x.version++
	}
	return app, ok
}

func (x *index) putLocked(a *v1alpha1.Application) {
	k := x.key(a)
	x.removeLocked(k)
	app, ok := AppOf(a)
	if !ok {
		return
	}
	x.apps[k] = a.DeepCopy()
	x.appOf[k] = app
	if x.byApp[app] == nil {
		x.byApp[app] = map[appKey]struct{}{}
	}
	x.byApp[app][k] = struct{}{}
}

func (x *index) removeLocked(k appKey) {
	app, ok := x.appOf[k]
	if !ok {
		return
	}
	delete(x.apps, k)
	delete(x.appOf, k)
	delete(x.byApp[app], k)
	if len(x.byApp[app]) == 0 {
		delete(x.byApp, app)
	}
}

// isReady reports whether a first listing has been loaded.
func (x *index) isReady() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.ready
}

// get returns a copy of the Application k, or nil.
func (x *index) get(k appKey) *v1alpha1.Application {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if a := x.apps[k]; a != nil {
		return a.DeepCopy()
	}
	return nil
}

// forApp returns copies of the Applications that deploy app, by key.
func (x *index) forApp(app string) []*v1alpha1.Application {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*v1alpha1.Application, 0, len(x.byApp[app]))
	for k := range x.byApp[app] {
		out = append(out, x.apps[k].DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return x.key(out[i]).String() < x.key(out[j]).String() })
	return out
}
