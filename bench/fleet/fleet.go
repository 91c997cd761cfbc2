// Package fleet holds the results of the Argo CD fleet race (make
// bench-argocd, run by the e2e harness's TestFleetBench) and renders them:
// the bench-argocd section of docs/benchmarks.md and its chart. Figures
// are medians over the bursts of a run; latencies are percentiles over the
// stream's releases. Rendering is deterministic: the same report gives the
// same bytes.
package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bucketops/bucketops/bench/docsection"
)

// Section is the marked section of docs/benchmarks.md this package writes.
const Section = "bench-argocd"

// Cost is what a feed cost the stack over a burst or a stream.
type Cost struct {
	// Generations are the repo-server's manifest generations (cache
	// misses) for the feed's sources.
	Generations int `json:"generations"`
	// CPU is the CPU seconds of every process of the stack (Argo CD,
	// Kubernetes, Redis, the bridge, the git server), the CI's
	// publishing left out.
	CPU float64 `json:"cpu_seconds"`
	// Processes are the CPU seconds by process name, the CI's publishing
	// (CIProcess) included, each with the children it reaped.
	Processes map[string]float64 `json:"cpu_seconds_by_process,omitempty"`
	// Reconciles are the application controller's reconciliations of the
	// feed's Applications, AppSetReconciles the ApplicationSet
	// controller's of the feed's ApplicationSet, AppSetRequeues the
	// requeues of it that its Applications' changes caused.
	Reconciles       int `json:"reconciles"`
	AppSetReconciles int `json:"applicationset_reconciles"`
	AppSetRequeues   int `json:"applicationset_requeues"`
}

// Burst is one burst: a release of every app at once.
type Burst struct {
	// Live is from the first publish to every app Synced at the release.
	Live time.Duration `json:"live"`
	// Publish is from the first publish to the last CI job done.
	Publish time.Duration `json:"publish"`
	// IdleReconciles are the application controller's reconciliations,
	// during the burst, of the other feeds' Applications, idle in the
	// cluster in an interleaved race (Report.Interleaved).
	IdleReconciles int `json:"idle_reconciles,omitempty"`
	Cost
}

// Stream is a stream: one release a second to a random app.
type Stream struct {
	Releases int `json:"releases"`
	// Latencies are publish start to Synced, per release that went live.
	Latencies []time.Duration `json:"latencies"`
	// Missed releases weren't live 2 minutes after the stream ended.
	Missed  int             `json:"missed"`
	Publish []time.Duration `json:"publish"`
	// Rest is how the stack came to rest before the stream, the feed's
	// apps deployed; nil in reports from before the race measured it.
	Rest *Rest `json:"rest,omitempty"`
	Cost
}

// Rest is how the stack came to rest before a stream: the race waited,
// window by window, until a window's CPU was no more than a margin below
// the quietest window before it (the work the setup set off had drained,
// and what remained was the stack's own steady load), or a limit passed.
// Cores are the CPU seconds of every process of the stack per second.
type Rest struct {
	Wait  time.Duration `json:"wait"`
	First float64       `json:"first_cores"`
	Last  float64       `json:"last_cores"`
	// Busiest is the process that took the most CPU in the first window.
	Busiest      string  `json:"busiest"`
	BusiestCores float64 `json:"busiest_cores"`
	// Settled is false when the limit passed first.
	Settled bool `json:"settled"`
}

// Feed is one way of feeding the fleet, raced.
type Feed struct {
	Name   string  `json:"feed"`
	Bursts []Burst `json:"bursts"`
	Stream *Stream `json:"stream,omitempty"`
}

// Report is one run of the race.
type Report struct {
	Apps    int           `json:"apps"`
	Objects int           `json:"objects"`
	Bursts  int           `json:"bursts"`
	Stream  time.Duration `json:"stream"`
	Took    time.Duration `json:"took"`
	CPUs    int           `json:"cpus"`
	Date    string        `json:"date"`
	// ArgoCD is the Argo CD version raced on; Reconciliation its
	// controller's period of comparing every Application.
	ArgoCD         string `json:"argocd"`
	Reconciliation string `json:"reconciliation"`
	// Levers are those of the install on in the run (the e2e harness's
	// names: sync-first, basic-auth, tar-exclude, template), and
	// NoValidate when the run set it.
	Levers []string `json:"levers"`
	Feeds  []Feed   `json:"feeds"`
	// Interleaved races run the feeds' bursts in rounds on one stack,
	// every feed's Applications present, in an order rotated each round,
	// and each stream with its feed set up again alone; older reports
	// ran each feed's bursts and stream in turn.
	Interleaved bool `json:"interleaved,omitempty"`
}

// NoValidate is the lever that is never the install's: Argo CD's
// Validate=false sync option on every feed's Applications.
const NoValidate = "no-validate"

// Process names the race reports CPU for, in the order it reports them;
// others follow in name order.
const (
	CIProcess  = "CI (publishing)"
	Bridge     = "bucketops-bridge"
	GitServer  = "git-http-backend"
	controller = "argocd-application-controller"
)

var processOrder = []string{controller, "argocd-repo-server", "argocd-cmp-server", "argocd-applicationset-controller", "argocd-server", "redis", "kube-apiserver", "etcd", "kube-controller-manager", Bridge, GitServer, CIProcess}

// floorProcesses do what any feed must have done for a release: the
// application controller's comparisons and sync, and the API server and
// etcd taking what it applies and the status it writes.
var floorProcesses = []string{controller, "kube-apiserver", "etcd"}

// server is the process that serves a feed's releases to Argo CD.
func server(feed string) string {
	if feed == Bucket {
		return Bridge
	}
	return GitServer
}

// ArgoCPU is what a release cost Argo CD (its processes and its Redis)
// and the feed's own server: the bridge for bucketops, the git server for
// the monorepo; the CPU the goals compare.
func (c Cost) ArgoCPU(feed string) float64 {
	s := c.Processes[server(feed)]
	for name, v := range c.Processes {
		if strings.HasPrefix(name, "argocd-") || name == "redis" {
			s += v
		}
	}
	return s
}

// Floor is the CPU of the floor processes.
func (c Cost) Floor() float64 {
	s := 0.0
	for _, name := range floorProcesses {
		s += c.Processes[name]
	}
	return s
}

// MedianBurst is the median of each of a feed's burst figures, process by
// process.
func (f Feed) MedianBurst() Burst {
	var live, pub []time.Duration
	var gens, cpu, rec, asr, asq, idle []float64
	procs := map[string][]float64{}
	for _, b := range f.Bursts {
		live, pub = append(live, b.Live), append(pub, b.Publish)
		gens, cpu = append(gens, float64(b.Generations)), append(cpu, b.CPU)
		rec, asr, asq = append(rec, float64(b.Reconciles)), append(asr, float64(b.AppSetReconciles)), append(asq, float64(b.AppSetRequeues))
		idle = append(idle, float64(b.IdleReconciles))
		for k, v := range b.Processes {
			procs[k] = append(procs[k], v)
		}
	}
	m := Burst{Live: median(live), Publish: median(pub), IdleReconciles: int(median(idle)), Cost: Cost{
		Generations: int(median(gens)), CPU: median(cpu), Reconciles: int(median(rec)),
		AppSetReconciles: int(median(asr)), AppSetRequeues: int(median(asq)), Processes: map[string]float64{},
	}}
	for k, vs := range procs {
		m.Processes[k] = median(vs)
	}
	return m
}

// Percentile is the p-th percentile (nearest rank) of ds; 0 when empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median[T time.Duration | float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// find returns the feed whose name starts with prefix and has no suffix
// after it, or nil.
func (r Report) find(name string) *Feed {
	for i := range r.Feeds {
		if r.Feeds[i].Name == name {
			return &r.Feeds[i]
		}
	}
	return nil
}

// Feed names, as the race names them.
const (
	Git      = "git monorepo"
	GitPaths = "git monorepo, manifest-generate-paths"
	Bucket   = "bucketops"
)

// Ratios are bucketops' burst advantage over each git feed: how many times
// sooner every app was live.
func (r Report) Ratios() map[string]float64 {
	out := map[string]float64{}
	bo := r.find(Bucket)
	if bo == nil || len(bo.Bursts) == 0 {
		return out
	}
	b := bo.MedianBurst().Live
	for _, name := range []string{Git, GitPaths} {
		if g := r.find(name); g != nil && len(g.Bursts) > 0 && b > 0 {
			out[name] = float64(g.MedianBurst().Live) / float64(b)
		}
	}
	return out
}

// bestGit is the git feed that did better: sooner in a burst, cheaper per
// release in the stream.
func (r Report) bestGit(better func(a, b *Feed) bool) *Feed {
	var best *Feed
	for _, name := range []string{Git, GitPaths} {
		if g := r.find(name); g != nil && (best == nil || better(g, best)) {
			best = g
		}
	}
	return best
}

func hasBursts(f *Feed) bool                  { return f != nil && len(f.Bursts) > 0 }
func hasStream(f *Feed) bool                  { return f != nil && f.Stream != nil && f.Stream.Releases > 0 }
func perRelease(s *Stream, v float64) float64 { return v / float64(s.Releases) }

// processes lists the process names of r's costs in report order.
func (r Report) processes() []string {
	seen := map[string]bool{}
	for _, f := range r.Feeds {
		for _, b := range f.Bursts {
			for k := range b.Processes {
				seen[k] = true
			}
		}
		if f.Stream != nil {
			for k := range f.Stream.Processes {
				seen[k] = true
			}
		}
	}
	var out []string
	for _, p := range processOrder {
		if seen[p] {
			out = append(out, p)
			delete(seen, p)
		}
	}
	rest := make([]string, 0, len(seen))
	for k := range seen {
		rest = append(rest, k)
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// Render returns the section's markdown; chart is the chart's path
// relative to the doc.
func Render(r Report, chart string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## A fleet on the real Argo CD: git monorepo against bucketops\n\n")
	p("_Generated by `make bench-argocd` on %s (%d CPUs, the whole run took %s); edit the prose outside this section, or the method in `bench/fleet`._\n\n", r.Date, r.CPUs, r.Took.Round(time.Minute))
	p("**Method.** The e2e harness's real Argo CD %s (API server, repo-server, application controller, ApplicationSet controller, the bucketops plugin's cmp-server, Redis, a real kube-apiserver and etcd) on this one machine holds a fleet of %d apps of %d ConfigMaps each, fed three ways, each by an ApplicationSet, each app Synced by automated sync, every Application compared by Argo CD every %s as well (its default). ", cmp.Or(r.ArgoCD, "v2.14"), r.Apps, r.Objects, cmp.Or(r.Reconciliation, "60s"))
	if r.Interleaved {
		p("The feeds share one stack and take turns: every feed's apps are deployed, then the bursts run in rounds, each round every feed's burst once, in an order rotated by one each round, so that no feed always runs first on a fresh stack or last on a tired one, and the machine's drift falls on all alike; the other feeds' apps stay in the cluster, idle, and Argo CD's timer compares them during every feed's bursts alike. Then every feed is torn down and its namespace deleted, and each feed in turn is deployed again alone for its stream, so that a stream's cost per release is its own. ")
	} else {
		p("The feeds ran in turn, each its bursts then its stream. ")
	}
	install := slices.DeleteFunc(slices.Clone(r.Levers), func(l string) bool { return l == NoValidate })
	if len(install) > 0 {
		p("The install's levers on: %s (docs/argocd.md). ", strings.Join(install, ", "))
	} else {
		p("None of the install's levers on. ")
	}
	if slices.Contains(r.Levers, NoValidate) {
		p("Besides the install, every feed's Applications had Argo CD's `Validate=false` sync option (%s), which skips kubectl's schema check and strict field validation. ", NoValidate)
	}
	p("\n\n")
	p("- **%s**: one directory per app in one repository served over smart HTTP by the real `git http-backend` (behind `net/http/cgi`, a process of its own), an ApplicationSet with a git directory generator, and Argo CD's GitHub push webhook (`/api/webhook`) posted after every push;\n", Git)
	p("- **%s**: the same, with `argocd.argoproj.io/manifest-generate-paths: .` on every Application, so that a push refreshes only the apps whose directory it touched;\n", GitPaths)
	p("- **%s**: `bucketops push` per app (8 at a time, as 8 CI jobs would), the bridge's ApplicationSet generator, and the bucket's notifications (the emulator's Pub/Sub) turned into syncs or refreshes by the bridge; the bridge's process also runs local mode's GCS emulator, whose work GCS does in production.\n\n", Bucket)
	p("A **burst** releases every app at once (a base image bump): one commit touching every directory and one webhook, or one `push` per app. It is timed from the first publish to every app Synced at the release (the last ConfigMap of each app, read from the API server every 250 ms), %d times per feed; the tables give medians. ", r.Bursts)
	if r.Stream > 0 {
		p("A **stream** then releases one random app a second for %s (one commit and webhook per release, or one `push`), each release timed from its publish to its app Synced at it; its costs run until every release is live or 2 minutes have passed. ", r.Stream)
	}
	p("**Generations** are the repo-server's fresh manifest generations for the feed's sources, counted in its log; **reconciliations** the application controller's of the feed's Applications and the ApplicationSet controller's of its ApplicationSet, also from their logs. **CPU** is read from `/proc` for every process of the stack, with the children it reaped (git, the plugin, the CGI): **stack** is all of them, **Argo CD + server** Argo CD's processes and Redis with the feed's own server (the bridge, or the git server), which the goals compare. The machine is shared and noisy; the ratios are what to read.\n\n")
	p("![fleet race](%s)\n\n", chart)

	p("### Burst: %d apps released at once (median of %d)\n\n", r.Apps, r.Bursts)
	b.WriteString("| feed | every app live | publish (CI side) | generations per app | Argo CD + server CPU s per app | stack CPU s per app | reconciliations per app | ApplicationSet reconciliations (requeues by its apps) |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Feeds {
		if len(f.Bursts) == 0 {
			continue
		}
		m := f.MedianBurst()
		n := float64(r.Apps)
		p("| %s | %s | %s | %.2f | %.3f | %.3f | %.1f | %d (%d) |\n", f.Name, fmtDur(m.Live), fmtDur(m.Publish), float64(m.Generations)/n, m.ArgoCPU(f.Name)/n, m.CPU/n, float64(m.Reconciles)/n, m.AppSetReconciles, m.AppSetRequeues)
	}
	b.WriteString("\n")
	if r.Interleaved {
		var idle []string
		for _, f := range r.Feeds {
			if len(f.Bursts) > 0 {
				idle = append(idle, fmt.Sprintf("%s %d", f.Name, f.MedianBurst().IdleReconciles))
			}
		}
		p("Reconciliations of the other feeds' idle apps during a feed's burst, charged to its stack CPU (median): %s.\n\n", strings.Join(idle, ", "))
	}
	if r.Stream > 0 {
		p("### Stream: one release a second for %s\n\n", r.Stream)
		b.WriteString("| feed | releases | publish to Synced p50 | p99 | not live 2 min after the stream | generations per release | Argo CD + server CPU s per release | stack CPU s per release | reconciliations per release | ApplicationSet reconciliations (requeues by its apps) | publish p50 (CI side) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, f := range r.Feeds {
			if !hasStream(&f) {
				continue
			}
			s := f.Stream
			p("| %s | %d | %s | %s | %d | %.2f | %.3f | %.3f | %.1f | %d (%d) | %s |\n", f.Name, s.Releases, fmtDur(Percentile(s.Latencies, 50)), fmtDur(Percentile(s.Latencies, 99)), s.Missed,
				perRelease(s, float64(s.Generations)), perRelease(s, s.ArgoCPU(f.Name)), perRelease(s, s.CPU), perRelease(s, float64(s.Reconciles)), s.AppSetReconciles, s.AppSetRequeues, fmtDur(Percentile(s.Publish, 50)))
		}
		b.WriteString("\n")
		renderRests(&b, r)
	}
	renderProcesses(&b, r)
	renderGoals(&b, r)
	return b.String()
}

// renderRests writes how the stack came to rest before each stream, for
// the feeds whose streams measured it.
func renderRests(b *strings.Builder, r Report) {
	var rests []string
	for _, f := range r.Feeds {
		if !hasStream(&f) || f.Stream.Rest == nil {
			continue
		}
		rest := f.Stream.Rest
		how := "came to rest after " + fmtDur(rest.Wait)
		if !rest.Settled {
			how = "had not come to rest after " + fmtDur(rest.Wait)
		}
		rests = append(rests, fmt.Sprintf("%s %s, from %.2f cores to %.2f (at first the busiest: %s, %.2f)", f.Name, how, rest.First, rest.Last, rest.Busiest, rest.BusiestCores))
	}
	if len(rests) == 0 {
		return
	}
	fmt.Fprintf(b, "Before each stream, its apps deployed, the race waited for the stack to come to rest (the stack's CPU over a window no longer falling and under %.0f%% of the machine's cores, up to a limit), so that no stream pays for what came before it: %s.\n\n", SaturatedShare*100, strings.Join(rests, "; "))
	if busy := saturatedRests(r); len(busy) > 0 {
		fmt.Fprintf(b, "**The machine was saturated at rest**: with nothing released, the stack still used %s, at least %.0f%% of the machine's %d cores, so the releases queued behind Argo CD's own steady work and this run measures the machine as much as the feeds. Race again on a machine where the stack rests lower before reading its times.\n\n", strings.Join(busy, ", "), SaturatedShare*100, r.CPUs)
	}
}

// SaturatedShare is the share of the machine's cores at or above which a
// stack has not come to rest, however flat its load: it leaves a release
// too little to run on.
const SaturatedShare = 0.75

// AtRest says whether a window's CPU, in cores, shows the stack at rest:
// no more than margin below the quietest window before it (the load has
// stopped falling) and under SaturatedShare of the machine's cpus. A
// stack still working through a setup's backlog holds most of the machine
// for minutes at a steady level (seen on 2026-12-08: 1.89 then 1.87 of 2
// cores, and the stream after it went live at p50 50 s against 1.9 s
// after a stack that fell to 0.06).
func AtRest(cores, quietest, margin float64, cpus int) bool {
	return cores > quietest-margin && cores < SaturatedShare*float64(cpus)
}

// saturatedRests names the feeds whose stack rested at SaturatedShare of
// the machine's cores or more, with the cores it rested at.
func saturatedRests(r Report) []string {
	var busy []string
	for _, f := range r.Feeds {
		if r.CPUs <= 0 || !hasStream(&f) || f.Stream.Rest == nil {
			continue
		}
		if last := f.Stream.Rest.Last; last >= SaturatedShare*float64(r.CPUs) {
			busy = append(busy, fmt.Sprintf("%.2f cores before the %s stream", last, f.Name))
		}
	}
	return busy
}

// renderProcesses writes where the CPU went, process by process, and the
// floor.
func renderProcesses(b *strings.Builder, r Report) {
	procs := r.processes()
	if len(procs) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("### Where the CPU goes, process by process\n\n")
	p("CPU seconds per released app in a burst (median), and per release in the stream.\n\n")
	b.WriteString("| process |")
	for _, f := range r.Feeds {
		if hasBursts(&f) {
			p(" %s, burst |", f.Name)
		}
		if hasStream(&f) {
			p(" %s, stream |", f.Name)
		}
	}
	b.WriteString("\n|---|")
	for _, f := range r.Feeds {
		if hasBursts(&f) {
			b.WriteString("---|")
		}
		if hasStream(&f) {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, name := range procs {
		p("| %s |", name)
		for _, f := range r.Feeds {
			if hasBursts(&f) {
				p(" %.3f |", f.MedianBurst().Processes[name]/float64(r.Apps))
			}
			if hasStream(&f) {
				p(" %.3f |", perRelease(f.Stream, f.Stream.Processes[name]))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	// The floor: what Argo CD does for any feed, the least any feed paid.
	floor, floorStream := -1.0, -1.0
	for _, f := range r.Feeds {
		if hasBursts(&f) {
			v := f.MedianBurst().Floor() / float64(r.Apps)
			if floor < 0 || v < floor {
				floor = v
			}
		}
		if hasStream(&f) {
			v := perRelease(f.Stream, f.Stream.Floor())
			if floorStream < 0 || v < floorStream {
				floorStream = v
			}
		}
	}
	if floor < 0 {
		return
	}
	p("**The floor** is Argo CD's own work for a release whatever feeds it: the application controller comparing and syncing the app, and the API server and etcd taking what it applies and the status it writes (%s). The least any feed paid for it was **%.3f CPU s per app** in a burst", strings.Join(floorProcesses, ", "), floor)
	if floorStream >= 0 {
		p(" and **%.3f per release** in the stream", floorStream)
	}
	p(". What each feed paid besides, the stack's CPU but the floor's processes (the repo-server's generations, the plugin, the ApplicationSet controller, the API server's requests, the feed's server):\n\n")
	for _, f := range r.Feeds {
		if !hasBursts(&f) {
			continue
		}
		m := f.MedianBurst()
		p("- %s: %.3f CPU s per app in a burst, on a floor of %.3f", f.Name, (m.CPU-m.Floor())/float64(r.Apps), m.Floor()/float64(r.Apps))
		if hasStream(&f) {
			s := f.Stream
			p("; %.3f per release in the stream, on %.3f", perRelease(s, s.CPU-s.Floor()), perRelease(s, s.Floor()))
		}
		b.WriteString(";\n")
	}
	b.WriteString("\n")
}

// renderGoals writes the goals of the race with met or not met, and by
// how much.
func renderGoals(b *strings.Builder, r Report) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	b.WriteString("### Against the goals\n\n")
	bo := r.find(Bucket)
	if hasStream(bo) {
		s := bo.Stream
		p99 := Percentile(s.Latencies, 99)
		gens := perRelease(s, float64(s.Generations))
		p("- Stream, publish to Synced p99 < 10 s, nothing left behind, exactly 1 generation per release: p99 %s, %d of %d releases not live, %.2f generations per release: %s.\n",
			fmtDur(p99), s.Missed, s.Releases, gens, verdict(p99 < 10*time.Second && s.Missed == 0 && s.Generations == s.Releases))
		if g := r.bestGit(func(a, b *Feed) bool {
			return hasStream(a) && (!hasStream(b) || perRelease(a.Stream, a.Stream.ArgoCPU(a.Name)) < perRelease(b.Stream, b.Stream.ArgoCPU(b.Name)))
		}); hasStream(g) {
			x := perRelease(s, s.ArgoCPU(Bucket)) / perRelease(g.Stream, g.Stream.ArgoCPU(g.Name))
			p("- Stream, Argo CD + bridge CPU per release ≤ 0.5× the monorepo's Argo CD + git server (%s, the cheaper): %.3f against %.3f CPU s, **%.2f×**: %s.\n",
				g.Name, perRelease(s, s.ArgoCPU(Bucket)), perRelease(g.Stream, g.Stream.ArgoCPU(g.Name)), x, verdict(x <= 0.5))
		}
	}
	if hasBursts(bo) {
		m := bo.MedianBurst()
		exact := true
		for _, br := range bo.Bursts {
			exact = exact && br.Generations == r.Apps
		}
		if g := r.bestGit(func(a, b *Feed) bool {
			return hasBursts(a) && (!hasBursts(b) || a.MedianBurst().Live < b.MedianBurst().Live)
		}); hasBursts(g) {
			gm := g.MedianBurst()
			sooner := float64(gm.Live) / float64(m.Live)
			cpu := m.ArgoCPU(Bucket) / gm.ArgoCPU(g.Name)
			p("- Burst, every app live ≥ 1.2× sooner than the monorepo (%s, the sooner) at no more CPU, exactly 1 generation per app in every burst: **%s** as soon (%s against %s), at **%.2f×** its Argo CD + server CPU, %.2f generations per app: %s.\n",
				g.Name, fmtRatio(sooner), fmtDur(m.Live), fmtDur(gm.Live), cpu, float64(m.Generations)/float64(r.Apps), verdict(sooner >= 1.2 && cpu <= 1 && exact))
		}
	}
	b.WriteString("\n")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return fmt.Sprintf("%.1f min", d.Minutes())
	case d >= time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func fmtRatio(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.1f×", x)
}

// Write renders r into the bench-argocd section of the doc at docPath and
// the chart at chartPath; the doc links the chart by its path relative to
// the doc.
func Write(r Report, docPath, chartPath, chartLink string) error {
	if err := docsection.Update(docPath, Section, Render(r, chartLink)); err != nil {
		return err
	}
	return writeFile(chartPath, Chart(r))
}
