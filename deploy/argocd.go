package deploy

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/watch"
)

// The Argo CD calls: connection, refresh, the watch that keeps the index.

// client is the Argo CD connection in use.
func (d *Deployer) client() application.ApplicationServiceClient {
	d.connMu.Lock()
	defer d.connMu.Unlock()
	return d.argo
}

// reauthenticate reconnects when Argo CD refused old's token: Connect reads
// the token file again, so a rotated token is picked up without a restart.
// Only the first caller for a connection reconnects; the failed call is
// retried with back-off as any other.
func (d *Deployer) reauthenticate(old application.ApplicationServiceClient, err error) {
	if status.Code(err) != codes.Unauthenticated {
		return
	}
	d.connMu.Lock()
	defer d.connMu.Unlock()
	if d.argo != old {
		return
	}
	argo, closer, cerr := d.cfg.Connect()
	if cerr != nil {
		d.metrics.argoErrors.WithLabelValues("connect", status.Code(cerr).String()).Inc()
		d.log.Warn("argo cd refused the token, and reconnecting failed", "error", cerr)
		return
	}
	d.closer.Close() // calls still on the old connection fail and are retried
	d.argo, d.closer = argo, closer
	d.log.Info("argo cd refused the token; reconnected with the token file's current content")
}

// connect calls Connect until it succeeds or ctx ends.
func (d *Deployer) connect(ctx context.Context) (application.ApplicationServiceClient, io.Closer, bool) {
	for attempt := 1; ; attempt++ {
		argo, closer, err := d.cfg.Connect()
		if err == nil {
			return argo, closer, true
		}
		d.metrics.argoErrors.WithLabelValues("connect", status.Code(err).String()).Inc()
		delay := d.backoff(attempt)
		d.log.Warn("can't reach Argo CD; retrying", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, nil, false
		case <-time.After(delay):
		}
	}
}

// refresh asks Argo CD for a normal refresh of one Application and returns
// it as refreshed.
func (d *Deployer) refresh(ctx context.Context, argo application.ApplicationServiceClient, name, ns, project string) (*v1alpha1.Application, error) {
	normal := string(v1alpha1.RefreshTypeNormal)
	q := &application.ApplicationQuery{Name: &name, AppNamespace: &ns, Refresh: &normal}
	if project != "" {
		q.Project = []string{project}
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	a, err := argo.Get(cctx, q)
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("refresh", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		return nil, err
	}
	return a, nil
}

// nudgeLater checks, NudgeAfter after a sync was requested, that Argo CD's
// controller started it. A sync requested just as a refresh completes can
// sit on the Application unstarted until the next reconciliation, minutes
// later (argo-cd#18500); a refresh makes the controller look again.
func (d *Deployer) nudgeLater(ctx context.Context, name, ns, project string, requested time.Time) {
	time.AfterFunc(d.cfg.NudgeAfter, func() {
		if ctx.Err() != nil {
			return
		}
		argo := d.client()
		cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
		defer cancel()
		a, err := argo.Get(cctx, &application.ApplicationQuery{Name: &name, AppNamespace: &ns})
		if err != nil {
			return
		}
		op := a.Status.OperationState
		if a.Operation == nil && op != nil && !op.StartedAt.Time.Before(requested.Truncate(time.Second)) {
			return // started
		}
		d.metrics.nudges.Inc()
		d.log.Info("a requested sync hasn't started; refreshing to nudge Argo CD's controller", "application", ns+"/"+name)
		d.refresh(ctx, argo, name, ns, project)
	})
}

// watch keeps the index fresh: a listing, then the watch stream (which
// starts by replaying every Application), again after any error.
func (d *Deployer) watch(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := d.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		delay := d.backoff(attempt + 1)
		d.log.Warn("argo cd application watch ended; reconnecting", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// relistAfter is how long after a watch starts the bridge lists the
// Applications once more (relist).
const relistAfter = 2 * time.Second

// relist lists the Applications once, relistAfter into a watch, and takes
// in those the index lacks. argocd-server's Watch lists the Applications,
// sends them, and only then subscribes to changes: an Application created
// in between reaches the watch neither way, and would stay unknown to the
// bridge until it changes or the watch reconnects; a release for it
// would wait. Applications the index has are left to the watch, whose
// events are newer than this listing.
func (d *Deployer) relist(ctx context.Context, argo application.ApplicationServiceClient) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(relistAfter):
	}
	lctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	list, err := argo.List(lctx, &application.ApplicationQuery{})
	if err != nil {
		if ctx.Err() == nil {
			d.metrics.argoErrors.WithLabelValues("list", status.Code(err).String()).Inc()
			d.log.Warn("relisting applications after the watch started failed; the watch goes on", "error", err)
		}
		return
	}
	for i := range list.Items {
		a := &list.Items[i]
		if app, ok := d.index.addIfAbsent(a); ok {
			d.log.Info("an Application the watch missed was found by listing again", "application", d.index.key(a).String(), "app", app)
			d.adopt(app)
		}
	}
}

func (d *Deployer) watchOnce(ctx context.Context) error {
	argo := d.client()
	lctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	list, err := argo.List(lctx, &application.ApplicationQuery{})
	cancel()
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("list", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		return fmt.Errorf("list applications: %w", err)
	}
	d.index.replace(list.Items)
	d.log.Info("application index loaded", "applications", len(list.Items))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := argo.Watch(wctx, &application.ApplicationQuery{})
	if err != nil {
		d.metrics.argoErrors.WithLabelValues("watch", status.Code(err).String()).Inc()
		d.reauthenticate(argo, err)
		return fmt.Errorf("watch applications: %w", err)
	}
	go d.relist(wctx, argo)
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				d.metrics.argoErrors.WithLabelValues("watch", status.Code(err).String()).Inc()
				d.reauthenticate(argo, err)
			}
			return fmt.Errorf("watch applications: %w", err)
		}
		d.index.apply(ev.Type, &ev.Application)
		if app, ok := AppOf(&ev.Application); ok && ev.Type != watch.Deleted {
			d.adopt(app)
		}
	}
}
