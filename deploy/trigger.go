package deploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What a release asks of Argo CD, per Application.

// deploy refreshes every Application of app and syncs those that need it.
// Before the index has loaded, it fails so the app is retried.
func (d *Deployer) deploy(ctx context.Context, app string, gen int64, written, received time.Time) error {
	if !d.index.isReady() {
		return errors.New("the Application index hasn't loaded from Argo CD yet")
	}
	apps := d.index.forApp(app)
	if len(apps) == 0 {
		d.log.Info("no Argo CD Application deploys this app", "app", app, "generation", gen)
		return nil
	}
	var errs []error
	for _, a := range apps {
		if err := d.deployApplication(ctx, app, gen, written, received, a); err != nil {
			errs = append(errs, fmt.Errorf("application %s: %w", d.index.key(a), err))
		}
	}
	return errors.Join(errs...)
}

func (d *Deployer) deployApplication(ctx context.Context, app string, gen int64, written, received time.Time, a *v1alpha1.Application) error {
	name, ns, project := a.Name, d.index.key(a).Namespace, a.Spec.Project
	argo := d.client()
	refreshed, err := d.refresh(ctx, argo, name, ns, project)
	if err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	// Once per refresh that reached Argo CD, not per attempt.
	now := d.now()
	if !received.IsZero() {
		d.metrics.latency.Observe(now.Sub(received).Seconds())
	}
	if !written.IsZero() {
		d.metrics.finalizeLatency.Observe(now.Sub(written).Seconds())
	}
	d.log.Info("refreshed", "app", app, "generation", gen, "application", d.index.key(a).String(), "revision", refreshed.Status.Sync.Revision)
	d.recordComparison(app, gen, comparisonError(refreshed))
	if !d.cfg.Sync {
		return nil
	}
	if p := refreshed.Spec.SyncPolicy; p != nil && p.Automated != nil {
		// Argo CD syncs it itself once the refresh shows it out of sync; a
		// sync of ours would race it.
		return nil
	}
	if refreshed.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced {
		return nil
	}
	prune := d.cfg.Prune
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	requested := time.Now()
	_, err = argo.Sync(cctx, &application.ApplicationSyncRequest{
		Name: &name, AppNamespace: &ns, Project: &project, Prune: &prune,
	})
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("sync", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("sync: an operation is running; retrying after it: %w", err)
		}
		return fmt.Errorf("sync: %w", err)
	}
	d.log.Info("sync started", "app", app, "generation", gen, "application", d.index.key(a).String(), "prune", prune)
	d.nudgeLater(ctx, name, ns, project, requested)
	return nil
}
