package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bucketops/bucketops/appset"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/webhook"
)

// fleet wires the ApplicationSet generator, on when a generator token is
// given, and its refresher, on when the bridge can also reach the
// Kubernetes API (in-cluster, or --kubeconfig) and
// --applicationset-configmap isn't empty.
func (b bridge) fleet(st *store.Store, reg prometheus.Registerer) (http.Handler, *appset.Refresher, error) {
	hasToken := false
	for _, t := range b.tokens {
		hasToken = hasToken || t.Role == webhook.RoleGenerator
	}
	if !hasToken {
		b.log.Info("no generator token: the ApplicationSet generator is off (give --token-file generator=PATH)")
		return nil, nil, nil
	}
	gen, err := appset.New(appset.Config{Releases: st, GitURL: b.cfg.generatorGitURL, Logger: b.log.With("component", "appset")})
	if err != nil {
		return nil, nil, err
	}
	kube, err := b.kubeConfig()
	if err != nil {
		return nil, nil, err
	}
	if kube == nil || b.cfg.appsetConfigMap == "" {
		b.log.Info("the ApplicationSet generator is on; the refresher is off: ApplicationSets run it every requeueAfterSeconds only (run in-cluster or give --kubeconfig)")
		return gen, nil, nil
	}
	client, err := dynamic.NewForConfig(kube)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ref, err := appset.NewRefresher(appset.RefresherConfig{
		Releases: st,
		Sets:     appset.Kube{Client: client, Namespace: b.cfg.argocdNS, ConfigMap: b.cfg.appsetConfigMap},
		Logger:   b.log.With("component", "appset"),
		Registry: reg,
	})
	if err != nil {
		return nil, nil, err
	}
	b.log.Info("the ApplicationSet generator is on; new and retired apps refresh the ApplicationSets that use it", "namespace", b.cfg.argocdNS, "configmap", b.cfg.appsetConfigMap)
	return gen, ref, nil
}

// kubeConfig is --kubeconfig's cluster, else the pod's own, else nil.
func (b bridge) kubeConfig() (*rest.Config, error) {
	if b.cfg.kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", b.cfg.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return c, nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster kubernetes config: %w", err)
	}
	return c, nil
}

// runRefresher runs ref, if any, until ctx ends.
func runRefresher(ctx context.Context, ref *appset.Refresher, log *slog.Logger) {
	if ref != nil {
		ref.Run(ctx)
		log.Debug("applicationset refresher stopped")
	}
}
