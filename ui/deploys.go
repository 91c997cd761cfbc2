package ui

import (
	"context"
	"errors"
	"time"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/store"
)

// Deploys tells what Argo CD ran of an app, from Argo CD's own record
// (deploy.Deployer).
type Deploys interface {
	Deploys(ctx context.Context, app string) (deploy.Deploys, error)
}

// noArgoCD is what the pages say of deploys without Argo CD: they never
// guess.
const noArgoCD = "deploys unknown (no Argo CD)"

// deploysWait bounds reading one app's record; it reads the bridge's index
// and git view, not Argo CD.
const deploysWait = 5 * time.Second

// record reads app's record, or says why the pages can't show it.
func (u *UI) record(ctx context.Context, app string) (deploy.Deploys, string) {
	if u.cfg.Deploys == nil {
		return deploy.Deploys{}, noArgoCD
	}
	ctx, cancel := context.WithTimeout(ctx, deploysWait)
	defer cancel()
	ds, err := u.cfg.Deploys.Deploys(ctx, app)
	switch {
	case errors.Is(err, deploy.ErrNoArgoCD):
		return ds, noArgoCD
	case errors.Is(err, deploy.ErrIndexLoading):
		return ds, "deploys unknown for now: the bridge is still loading Argo CD's Applications"
	case err != nil:
		u.log.Warn("ui: reading Argo CD's record failed", "app", app, "error", err)
		return ds, "deploys unknown: Argo CD's record can't be read now"
	}
	return ds, ""
}

// deploysView is the deploys of some releases, for a template: Of(gen)
// gives a release's lines.
type deploysView struct {
	unknown string
	byGen   map[int64][]string
}

// deploysOf judges rels by app's record.
func (u *UI) deploysOf(ctx context.Context, app string, rels []store.Release) deploysView {
	ds, unknown := u.record(ctx, app)
	v := deploysView{unknown: unknown, byGen: make(map[int64][]string, len(rels))}
	if unknown == "" {
		for _, rel := range rels {
			v.byGen[rel.Generation] = ds.Release(rel).Summary
		}
	}
	return v
}

// Of returns what the record says of generation gen, a line each.
func (v deploysView) Of(gen int64) []string {
	if v.unknown != "" {
		return []string{v.unknown}
	}
	return v.byGen[gen]
}

// liveCell is what one Application ran at a time, on the as-of page.
type liveCell struct {
	Application string
	Generation  int64
	Since       time.Time
	// Text says why there is no generation.
	Text string
}

// liveView is what each app's Applications ran at a time: Of(app).
type liveView struct {
	unknown string
	byApp   map[string][]liveCell
}

// liveAt reads what the Applications of apps ran at t.
func (u *UI) liveAt(ctx context.Context, apps []string, t time.Time) liveView {
	if u.cfg.Deploys == nil {
		return liveView{unknown: noArgoCD}
	}
	v := liveView{byApp: make(map[string][]liveCell, len(apps))}
	for _, app := range apps {
		ds, unknown := u.record(ctx, app)
		if unknown != "" {
			v.byApp[app] = []liveCell{{Text: unknown}}
			continue
		}
		cells := []liveCell{}
		for _, l := range ds.LiveAt(t) {
			c := liveCell{Application: l.Application, Generation: l.Generation, Since: l.Since}
			switch {
			case l.Verdict == deploy.VerdictForgotten:
				c.Text = "older than what Argo CD keeps"
			case l.Verdict != deploy.VerdictDeployed:
				c.Text = "nothing deployed yet"
			case l.Generation == 0:
				c.Text = "a revision that is no release of " + app
			}
			cells = append(cells, c)
		}
		if len(cells) == 0 {
			cells = append(cells, liveCell{Text: "no Argo CD Application deploys it"})
		}
		v.byApp[app] = cells
	}
	return v
}

// Of returns what app's Applications ran.
func (v liveView) Of(app string) []liveCell {
	if cells, ok := v.byApp[app]; ok {
		return cells
	}
	return []liveCell{{Text: v.unknown}}
}
