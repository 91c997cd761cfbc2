package deploy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"

	"github.com/bucketops/bucketops/store"
)

// Deploys is what Argo CD ran of an app, from its own record: per
// Application, the releases it deployed and when (status.history), the
// release it refuses now (a ComparisonError) and its last sync operation.
type Deploys struct {
	App string `json:"app"`
	// At is when the record was read: the newest deploy of each
	// Application is live until then.
	At time.Time `json:"at"`
	// ArgoCDNamespace is Argo CD's control-plane namespace: Applications
	// there are named without it.
	ArgoCDNamespace string               `json:"argocd_namespace"`
	Applications    []ApplicationDeploys `json:"applications"`
}

// ApplicationDeploys is one Application's record.
type ApplicationDeploys struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Deploys are its status.history, oldest first: each release is live
	// from its DeployedAt until the next one's (Until nil: live now).
	Deploys []Interval `json:"deploys"`
	// HistoryLimit is how many deploys Argo CD keeps of it
	// (spec.revisionHistoryLimit, default 10). HistoryFull says it keeps
	// that many: older deploys were dropped, and what was published before
	// the oldest one kept may have been deployed, unrecorded.
	HistoryLimit int  `json:"history_limit"`
	HistoryFull  bool `json:"history_full"`
	// Refused is the release Argo CD can't generate manifests for now: its
	// ComparisonError condition names app@generation, as the plugin's error
	// line does.
	Refused *Refusal `json:"refused,omitempty"`
	// Operation is Argo CD's last sync operation on it.
	Operation *Operation `json:"operation,omitempty"`
}

// Interval is one entry of an Application's history: a release live from
// DeployedAt until Until.
type Interval struct {
	// Generation is the release the revision is in the git view; 0 when
	// it names none of the app's (a revision of another source).
	Generation      int64      `json:"generation,omitempty"`
	Revision        string     `json:"revision"`
	HistoryID       int64      `json:"history_id"`
	DeployStartedAt *time.Time `json:"deploy_started_at,omitempty"`
	DeployedAt      time.Time  `json:"deployed_at"`
	Until           *time.Time `json:"until,omitempty"`
	// InitiatedBy is who started the sync: a user, or "automated".
	InitiatedBy string `json:"initiated_by,omitempty"`
}

// Refusal is a release Argo CD refuses to generate, and its message.
type Refusal struct {
	Generation int64  `json:"generation"`
	Message    string `json:"message"`
}

// Operation is an Application's last sync operation.
type Operation struct {
	Generation int64      `json:"generation,omitempty"`
	Phase      string     `json:"phase"`
	Message    string     `json:"message,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Deploys returns what the Argo CD Applications that deploy app ran, and
// when. It is read from Argo CD's own record, each Application's
// status.history (each revision named as a release through the git view),
// its ComparisonError and its operationState as the index holds them,
// never from what this bridge did, so every replica answers alike; it
// makes no request to Argo CD. Argo CD keeps only the last
// spec.revisionHistoryLimit deploys of an Application: what it dropped is
// not guessed (ApplicationDeploys.HistoryFull). It fails with ErrNoArgoCD
// without Argo CD and ErrIndexLoading before the index loaded.
func (d *Deployer) Deploys(ctx context.Context, app string) (Deploys, error) {
	if d.cfg.Connect == nil {
		return Deploys{}, ErrNoArgoCD
	}
	if !d.index.isReady() {
		return Deploys{}, ErrIndexLoading
	}
	if err := store.ValidateApp(app); err != nil {
		return Deploys{}, err
	}
	out := Deploys{App: app, At: d.now().UTC(), ArgoCDNamespace: d.cfg.Namespace, Applications: []ApplicationDeploys{}}
	// A commit names the same release for every Application and every
	// call; the git view keeps the mapping, this only spares asking twice.
	gens := map[string]int64{}
	generation := func(sha string) int64 {
		if sha == "" {
			return 0
		}
		g, ok := gens[sha]
		if !ok {
			g = d.generationOfRecord(ctx, app, sha)
			gens[sha] = g
		}
		return g
	}
	refusal := refusalRE(app)
	for _, a := range d.index.forApp(app) {
		k := d.index.key(a)
		ad := ApplicationDeploys{Name: k.Name, Namespace: k.Namespace, HistoryLimit: a.Spec.GetRevisionHistoryLimit(), Deploys: []Interval{}}
		hist := slices.Clone(a.Status.History)
		slices.SortStableFunc(hist, func(x, y v1alpha1.RevisionHistory) int { return cmp.Compare(x.ID, y.ID) })
		ad.HistoryFull = len(hist) >= ad.HistoryLimit
		for i, h := range hist {
			rev := historyRevision(a, h)
			iv := Interval{Generation: generation(rev), Revision: rev, HistoryID: h.ID, DeployedAt: h.DeployedAt.Time.UTC(), InitiatedBy: initiator(h.InitiatedBy)}
			if h.DeployStartedAt != nil {
				t := h.DeployStartedAt.Time.UTC()
				iv.DeployStartedAt = &t
			}
			if i+1 < len(hist) {
				t := hist[i+1].DeployedAt.Time.UTC()
				iv.Until = &t
			}
			ad.Deploys = append(ad.Deploys, iv)
		}
		if m := refusal.FindStringSubmatch(comparisonError(a)); m != nil {
			if g, err := strconv.ParseInt(m[1], 10, 64); err == nil {
				ad.Refused = &Refusal{Generation: g, Message: comparisonError(a)}
			}
		}
		if op := a.Status.OperationState; op != nil {
			o := &Operation{Phase: string(op.Phase), Message: op.Message, StartedAt: op.StartedAt.Time.UTC()}
			if op.FinishedAt != nil {
				t := op.FinishedAt.Time.UTC()
				o.FinishedAt = &t
			}
			if op.SyncResult != nil && op.SyncResult.Revision != "" {
				o.Generation = generation(op.SyncResult.Revision)
			} else if op.Operation.Sync != nil {
				o.Generation = generation(op.Operation.Sync.Revision)
			}
			ad.Operation = o
		}
		out.Applications = append(out.Applications, ad)
	}
	return out, nil
}

// unknownFor is how long a commit that names no release of its app is
// taken to name none: a commit of another repository in an Application's
// history (from before it followed the git view) would otherwise cost the
// bucket a request for the head at each reading. A release newer than the
// view's snapshot is found by that request, so the answer can't be kept
// for good. unknownBytes bounds what is remembered.
const (
	unknownFor   = time.Minute
	unknownBytes = 256 << 10
)

// generationOfRecord names the release a commit of an Application's
// record is, 0 for none.
func (d *Deployer) generationOfRecord(ctx context.Context, app, sha string) int64 {
	key := app + "@" + sha
	if at, ok := d.unknown.Get(key); ok && d.now().Sub(at) < unknownFor {
		return 0
	}
	r, err := d.generationOf(ctx, app, sha)
	switch {
	case err == nil:
		return r.Generation
	case errors.Is(err, store.ErrNotFound) || !sha1RE.MatchString(sha):
		d.unknown.Add(key, d.now(), int64(len(key)+64))
	}
	return 0
}

// refusalRE finds app@generation in a message, as the plugin's error line
// starts: "bucketops: prod/payments@1733…: untrusted_release (403): …",
// however Argo CD wraps it.
func refusalRE(app string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[^a-z0-9._/-])` + regexp.QuoteMeta(app) + `@([0-9]+)`)
}

// historyRevision is the commit of the bucketops source a history entry
// deployed.
func historyRevision(a *v1alpha1.Application, h v1alpha1.RevisionHistory) string {
	if h.Revision != "" || len(h.Revisions) == 0 {
		return h.Revision
	}
	for i, s := range h.Sources {
		if isBucketops(s.Plugin) && i < len(h.Revisions) {
			return h.Revisions[i]
		}
	}
	for i, s := range a.Spec.Sources {
		if isBucketops(s.Plugin) && i < len(h.Revisions) {
			return h.Revisions[i]
		}
	}
	return ""
}

func initiator(i v1alpha1.OperationInitiator) string {
	if i.Automated {
		return "automated"
	}
	return i.Username
}

// Verdict sums up what became of a release on an Application, or on all.
type Verdict string

const (
	// VerdictDeployed: live at some time.
	VerdictDeployed Verdict = "deployed"
	// VerdictRefused: Argo CD can't generate its manifests (ComparisonError).
	VerdictRefused Verdict = "refused"
	// VerdictSyncFailed: Argo CD's last sync, of this release, failed.
	VerdictSyncFailed Verdict = "sync_failed"
	// VerdictSyncing: Argo CD is syncing it now.
	VerdictSyncing Verdict = "syncing"
	// VerdictForgotten: published before the oldest deploy Argo CD still
	// keeps of a full history: it may have been deployed, and Argo CD no
	// longer says.
	VerdictForgotten Verdict = "older_than_history"
	// VerdictNeverDeployed: no Application ran it.
	VerdictNeverDeployed Verdict = "never_deployed"
)

// ReleaseDeploys is one release's part of the record.
type ReleaseDeploys struct {
	Generation   int64          `json:"generation"`
	Published    time.Time      `json:"published"`
	Verdict      Verdict        `json:"verdict"`
	Applications []ReleaseOnApp `json:"applications"`
	// Summary says it in words, a line each: what the CLI and the pages
	// show.
	Summary []string `json:"summary"`
}

// ReleaseOnApp is what one Application did with a release.
type ReleaseOnApp struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Verdict   Verdict    `json:"verdict"`
	Live      []Interval `json:"live,omitempty"`
	Message   string     `json:"message,omitempty"`
}

// Release judges rel by the record: where and when it was live, refused,
// never deployed, or older than what Argo CD keeps.
func (ds Deploys) Release(rel store.Release) ReleaseDeploys {
	out := ReleaseDeploys{Generation: rel.Generation, Published: rel.Time, Applications: []ReleaseOnApp{}}
	count := map[Verdict]int{}
	for _, a := range ds.Applications {
		on := ReleaseOnApp{Name: a.Name, Namespace: a.Namespace}
		for _, iv := range a.Deploys {
			if iv.Generation == rel.Generation {
				on.Live = append(on.Live, iv)
			}
		}
		op := a.Operation
		switch {
		case len(on.Live) > 0:
			on.Verdict = VerdictDeployed
		case a.Refused != nil && a.Refused.Generation == rel.Generation:
			on.Verdict, on.Message = VerdictRefused, a.Refused.Message
		case op != nil && op.Generation == rel.Generation && (op.Phase == string(synccommon.OperationFailed) || op.Phase == string(synccommon.OperationError)):
			on.Verdict, on.Message = VerdictSyncFailed, op.Message
		case op != nil && op.Generation == rel.Generation && op.Phase == string(synccommon.OperationRunning):
			on.Verdict, on.Message = VerdictSyncing, op.Message
		case a.HistoryFull && (len(a.Deploys) == 0 || forgotten(rel.Time, a.Deploys[0].DeployedAt)):
			on.Verdict = VerdictForgotten
		default:
			on.Verdict = VerdictNeverDeployed
		}
		// A release deployed once may be refused now (a rollback to it
		// under a changed trust policy): both are said.
		if on.Verdict == VerdictDeployed && a.Refused != nil && a.Refused.Generation == rel.Generation {
			on.Message = a.Refused.Message
		}
		count[on.Verdict]++
		out.Applications = append(out.Applications, on)
	}
	for _, v := range []Verdict{VerdictDeployed, VerdictRefused, VerdictSyncFailed, VerdictSyncing, VerdictForgotten} {
		if count[v] > 0 {
			out.Verdict = v
			break
		}
	}
	if out.Verdict == "" {
		out.Verdict = VerdictNeverDeployed
	}
	out.Summary = ds.summary(out)
	return out
}

// forgotten reports whether a release published at published may have been
// deployed before oldest, the oldest deploy a full history keeps. Argo CD's
// times have whole seconds: a publish in the same second counts as before.
func forgotten(published, oldest time.Time) bool {
	return published.Before(oldest.Add(time.Second))
}

// summary words a release's record, a line each.
func (ds Deploys) summary(r ReleaseDeploys) []string {
	var lines []string
	for _, on := range r.Applications {
		name := ds.name(on.Name, on.Namespace)
		for _, iv := range on.Live {
			if iv.Until == nil {
				lines = append(lines, fmt.Sprintf("live on %s since %s (now)", name, clock(iv.DeployedAt)))
			} else {
				lines = append(lines, fmt.Sprintf("live on %s from %s to %s", name, clock(iv.DeployedAt), clock(*iv.Until)))
			}
		}
		switch {
		case on.Message != "" && (on.Verdict == VerdictRefused || on.Verdict == VerdictDeployed):
			lines = append(lines, fmt.Sprintf("refused by Argo CD on %s: %s", name, on.Message))
		case on.Verdict == VerdictSyncFailed:
			lines = append(lines, fmt.Sprintf("sync failed on %s: %s", name, on.Message))
		case on.Verdict == VerdictSyncing:
			lines = append(lines, fmt.Sprintf("syncing on %s", name))
		}
	}
	switch r.Verdict {
	case VerdictNeverDeployed:
		if len(r.Applications) == 0 {
			lines = append(lines, "never deployed (no Argo CD Application deploys "+ds.App+")")
		} else {
			lines = append(lines, "never deployed")
		}
	case VerdictForgotten:
		lines = append(lines, "older than what Argo CD keeps (the last "+strconv.Itoa(ds.historyLimit())+" deploys of each Application)")
	}
	return lines
}

func (ds Deploys) historyLimit() int {
	limit := 0
	for _, a := range ds.Applications {
		if a.HistoryFull {
			limit = max(limit, a.HistoryLimit)
		}
	}
	return limit
}

// name is how an Application is shown: its name, with its namespace when
// that isn't Argo CD's own.
func (ds Deploys) name(name, namespace string) string {
	if namespace == "" || namespace == ds.ArgoCDNamespace {
		return name
	}
	return namespace + "/" + name
}

func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// Live is what one Application ran at a time.
type Live struct {
	Application string `json:"application"`
	// Generation is the release live then (0: none, or a revision that is
	// no release of the app); Since is when it was deployed.
	Generation int64     `json:"generation,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	// Verdict is deployed when the record says, forgotten when t is older
	// than what Argo CD keeps, never_deployed when nothing was deployed
	// yet.
	Verdict Verdict `json:"verdict"`
}

// LiveAt returns what each Application ran at t, by the record.
func (ds Deploys) LiveAt(t time.Time) []Live {
	out := make([]Live, 0, len(ds.Applications))
	for _, a := range ds.Applications {
		l := Live{Application: ds.name(a.Name, a.Namespace), Verdict: VerdictNeverDeployed}
		for _, iv := range a.Deploys {
			if iv.DeployedAt.After(t) {
				break
			}
			l.Generation, l.Since, l.Verdict = iv.Generation, iv.DeployedAt, VerdictDeployed
		}
		if l.Verdict != VerdictDeployed && a.HistoryFull {
			l.Verdict = VerdictForgotten
		}
		out = append(out, l)
	}
	return out
}
