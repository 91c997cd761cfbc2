package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bucketops/bucketops/bench/fleet"
	"github.com/bucketops/bucketops/deploy"
)

// levers are what the install does so that a release costs Argo CD less
// (docs/argocd.md), each switchable so that the fleet race can measure
// what each one buys: BENCH_ARGOCD_LEVERS names those on ("all", the
// default, is the install; "none" is Argo CD as it comes). noValidate is
// not the install's: it is a trade-off a fleet may choose, measured only
// when named ("all,no-validate").
type levers struct {
	// syncFirst: the bridge syncs an automated Application instead of
	// refreshing it (--sync-automated).
	syncFirst bool
	// generateFirst: with syncFirst, the bridge has Argo CD generate the
	// release before the sync of an Application whose last comparison is
	// about to expire (--generate-first=expiring), so that a comparison
	// beside the sync's finds it cached; generateAlways (not the
	// install's: "generate-first-always") does so before every sync.
	generateFirst, generateAlways bool
	// basicAuth: forceHttpBasicAuth on the git view's repository
	// credentials, so git sends them without a 401 and no askpass runs.
	basicAuth bool
	// tarExclude: ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=.git, so the
	// repo-server sends the plugin release.json, not the repository.
	tarExclude bool
	// template: the race's ApplicationSets render with Argo CD's plain
	// templates (goTemplate: false) rather than Go templates.
	template bool
	// noValidate: Argo CD's Validate=false sync option on every feed's
	// Applications, so that kubectl skips its schema check before each
	// apply (and the API server's strict field validation with it).
	noValidate bool
}

// leverNames are the install's levers; fleet.NoValidate and
// generateAlways are named apart.
var leverNames = []string{"sync-first", "basic-auth", "tar-exclude", "template", "generate-first"}

// generateAlways is the lever that has the bridge generate first before
// every sync (--generate-first=always), not only where it expects a
// comparison beside the sync's.
const generateAlways = "generate-first-always"

// parseLevers reads BENCH_ARGOCD_LEVERS: "none", or names separated by
// commas, each "all" (the install's levers, also what "" means), one of
// leverNames, or fleet.NoValidate.
func parseLevers(v string) (levers, error) {
	switch v = strings.TrimSpace(v); v {
	case "":
		v = "all"
	case "none":
		return levers{}, nil
	}
	var l levers
	for name := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(name) {
		case "all":
			l.syncFirst, l.basicAuth, l.tarExclude, l.template, l.generateFirst = true, true, true, true, true
		case fleet.NoValidate:
			l.noValidate = true
		case "sync-first":
			l.syncFirst = true
		case "basic-auth":
			l.basicAuth = true
		case "tar-exclude":
			l.tarExclude = true
		case "template":
			l.template = true
		case "generate-first":
			l.generateFirst = true
		case generateAlways:
			l.generateFirst, l.generateAlways = true, true
		default:
			return levers{}, fmt.Errorf("BENCH_ARGOCD_LEVERS: %q is not a lever; use all, none or some of %s,%s,%s", name, strings.Join(leverNames, ","), generateAlways, fleet.NoValidate)
		}
	}
	return l, nil
}

// names lists the levers on, in leverNames' order, then
// generate-first-always and no-validate.
func (l levers) names() []string {
	on := []bool{l.syncFirst, l.basicAuth, l.tarExclude, l.template, l.generateFirst}
	var out []string
	for i, n := range leverNames {
		if on[i] {
			out = append(out, n)
		}
	}
	if l.generateAlways {
		out = append(out, generateAlways)
	}
	if l.noValidate {
		out = append(out, fleet.NoValidate)
	}
	return slices.Clip(out)
}

// bridgeArgs are the bridge's flags for the levers: sync-first, when to
// generate first, and Argo CD's timeout.reconciliation (the stack's
// reconciliation), against which the bridge tells an expiring comparison.
func (l levers) bridgeArgs(reconciliation string) []string {
	mode := deploy.GenerateNever
	switch {
	case l.generateAlways:
		mode = deploy.GenerateAlways
	case l.generateFirst:
		mode = deploy.GenerateWhenExpiring
	}
	return []string{"--sync-automated=" + strconv.FormatBool(l.syncFirst), "--generate-first=" + mode.String(), "--argocd-reconciliation=" + reconciliation}
}
