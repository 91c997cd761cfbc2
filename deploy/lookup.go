package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrUnknownApplication is Caller's error for an instance name that names
// no Application deploying a bucketops app.
var ErrUnknownApplication = errors.New("unknown Argo CD Application")

// Caller is the Argo CD Application a manifest request is made for, as Argo
// CD holds it: what a tenancy policy judges, never what the request claims.
type Caller struct {
	Namespace, Name string
	// Project is the Application's spec.project ("default" when empty).
	Project string
	// Destination is spec.destination.namespace.
	Destination string
	// App is the bucketops app its plugin source names.
	App string
}

// Caller resolves an Application instance name, as Argo CD hands it to the
// plugin (ARGOCD_APP_NAME: "name" in Argo CD's namespace, "namespace_name"
// elsewhere; Application names can't hold "_"). It reads the index, and asks
// Argo CD when the index doesn't have the Application yet (it was just
// created). Only Applications whose plugin source names a bucketops app are
// found.
func (d *Deployer) Caller(ctx context.Context, instance string) (Caller, error) {
	if d.cfg.Connect == nil {
		return Caller{}, ErrNoArgoCD
	}
	k := appKey{Namespace: d.cfg.Namespace, Name: instance}
	if ns, name, ok := strings.Cut(instance, "_"); ok {
		k = appKey{Namespace: ns, Name: name}
	}
	if k.Name == "" || k.Namespace == "" {
		return Caller{}, fmt.Errorf("%w %q: the plugin sent no Application instance name", ErrUnknownApplication, instance)
	}
	d.index.mu.RLock()
	a := d.index.apps[k]
	d.index.mu.RUnlock()
	if a == nil {
		argo := d.client()
		if argo == nil {
			return Caller{}, fmt.Errorf("%w %s: the bridge hasn't connected to Argo CD yet; Argo CD retries", ErrUnknownApplication, k)
		}
		cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
		defer cancel()
		got, err := argo.Get(cctx, &application.ApplicationQuery{Name: &k.Name, AppNamespace: &k.Namespace})
		switch {
		case status.Code(err) == codes.NotFound || status.Code(err) == codes.PermissionDenied:
			return Caller{}, fmt.Errorf("%w %s: Argo CD has no such Application the bridge's token may read", ErrUnknownApplication, k)
		case err != nil:
			d.metrics.argoErrors.WithLabelValues("get", status.Code(err).String()).Inc()
			d.reauthenticate(argo, err)
			return Caller{}, fmt.Errorf("looking up Application %s in Argo CD: %w", k, err)
		}
		a = got
	}
	return callerOf(k, a)
}

func callerOf(k appKey, a *v1alpha1.Application) (Caller, error) {
	app, ok := AppOf(a)
	if !ok {
		return Caller{}, fmt.Errorf("%w %s: it has no %s plugin source", ErrUnknownApplication, k, PluginName)
	}
	project := a.Spec.Project
	if project == "" {
		project = "default"
	}
	return Caller{Namespace: k.Namespace, Name: k.Name, Project: project, Destination: a.Spec.Destination.Namespace, App: app}, nil
}
