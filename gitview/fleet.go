package gitview

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"golang.org/x/sync/errgroup"

	"github.com/bucketops/bucketops/store"
)

// The fleet repository serves every app's history in one repository, one
// branch per app, so that Argo CD keeps one clone for a whole fleet: one
// fetch brings every app's new releases, where an app's own repository
// costs a fetch per app. Its commits are the apps' own (the same SHAs as
// in each app's repository), so a SHA names the same release whichever
// repository Argo CD read it from.
//
// It is /git/-/fleet.git for every app of the bucket, and
// /git/PREFIX/-/fleet.git for the apps under PREFIX (PREFIX itself
// included, as the ApplicationSet generator's prefix). The branch of app
// prod/payments is refs/heads/prod/payments/- (FleetRevision): the "/-"
// keeps apps prod and prod/payments from needing a ref and a directory
// of the same name, which git can't store. There is no HEAD.
const fleetName = "-/fleet"

// FleetURL returns the fleet repository's URL of the apps under prefix
// ("" for all), given the git view's root URL (…/git).
func FleetURL(gitURL, prefix string) string {
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		return gitURL + "/" + prefix + "/" + fleetName + ".git"
	}
	return gitURL + "/" + fleetName + ".git"
}

// IsFleetURL reports whether repoURL is a fleet repository's.
func IsFleetURL(repoURL string) bool {
	return strings.HasSuffix(strings.TrimSuffix(repoURL, "/"), "/"+fleetName+".git")
}

// FleetRevision is app's branch in the fleet repository: the
// targetRevision of an Application that follows app's newest release.
func FleetRevision(app string) string { return app + "/-" }

// FleetApp returns the app a fleet repository's revision (FleetRevision,
// with or without refs/heads/) follows.
func FleetApp(revision string) (string, bool) {
	app, ok := strings.CutSuffix(strings.TrimPrefix(revision, "refs/heads/"), "/-")
	if !ok || store.ValidateApp(app) != nil {
		return "", false
	}
	return app, true
}

// fleetPrefix returns the prefix the repository path p (APP or
// PREFIX/-/fleet or -/fleet, without .git) serves, if it is a fleet
// repository's.
func fleetPrefix(p string) (string, bool) {
	if p == fleetName {
		return "", true
	}
	prefix, ok := strings.CutSuffix(p, "/"+fleetName)
	return prefix, ok
}

// fleet is the fleet repository under prefix: every app's history up to
// its head in the bucket, sorted by app. It lists the bucket's heads once
// and reads an app's history only when releases landed since its chain
// was last extended.
func (v *View) fleet(ctx context.Context, prefix string) ([]string, snapshots, error) {
	heads, err := v.src.List(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(heads, func(a, b store.Release) int { return strings.Compare(a.App, b.App) })
	apps := make([]string, len(heads))
	ss := make(snapshots, len(heads))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, h := range heads {
		apps[i] = h.App
		g.Go(func() error {
			s, err := v.extend(gctx, h.App, h.Generation)
			ss[i] = s
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return apps, ss, nil
}

// advertiseFleet answers GET info/refs?service=git-upload-pack on the
// fleet repository: one branch per app, at its newest release.
func (v *View) advertiseFleet(w http.ResponseWriter, r *http.Request, prefix string) {
	apps, ss, err := v.fleet(r.Context(), prefix)
	if err != nil {
		v.fail(w, "the fleet repository", err)
		return
	}
	ar := packp.NewAdvRefs()
	ar.Prefix = [][]byte{[]byte("# service=git-upload-pack"), pktline.Flush}
	for i, app := range apps {
		ar.References[plumbing.NewBranchReferenceName(FleetRevision(app)).String()] = ss[i].head().commit
	}
	for _, c := range uploadPackCaps {
		ar.Capabilities.Add(c)
	}
	ar.Capabilities.Add(capability.Agent, "bucketops")
	var b bytes.Buffer
	if err := ar.Encode(&b); err != nil {
		v.fail(w, "the fleet repository", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b.Bytes())
}

// uploadPackFleet answers one POST git-upload-pack on the fleet
// repository: as an app's, across every app's history.
func (v *View) uploadPackFleet(w http.ResponseWriter, r *http.Request, prefix string) {
	req, ok := readRequest(w, r)
	if !ok {
		return
	}
	_, ss, err := v.fleet(r.Context(), prefix)
	if err != nil {
		v.fail(w, "the fleet repository", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	out := pktline.NewEncoder(w)
	if len(ss) == 0 {
		out.EncodeString("ERR upload-pack: the fleet repository has no app\n")
		return
	}
	for _, h := range req.wants {
		if _, _, ok := ss.find(h); !ok {
			out.EncodeString(fmt.Sprintf("ERR upload-pack: not our ref %s: no app under this repository has such a release\n", h))
			return
		}
	}
	if err := negotiate(w, out, ss, req); err != nil {
		v.log.Warn("git view: upload-pack of the fleet repository failed", "prefix", prefix, "error", err)
	}
}
