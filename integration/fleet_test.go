//go:build e2e

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketops/bucketops/bench/fleet"
)

// The fleet race: the same fleet of apps fed to the same real Argo CD
// (and its ApplicationSet controller) from a git monorepo and from
// bucketops, their bursts interleaved (race). TestFleet runs a small
// burst in make e2e, as a regression check without timing assertions;
// make bench-argocd runs the whole race (TestFleetBench) and rewrites its
// section of docs/benchmarks.md.

// fleetSize is one race's shape.
type fleetSize struct {
	apps, objects int
	bursts        int           // burst repetitions
	stream        time.Duration // 0: no stream
}

// feed publishes releases of the fleet one way.
type feed interface {
	name() string
	namespace() string
	// setup publishes release r0 of every app and creates the
	// ApplicationSet; the caller waits for it to be deployed.
	setup(t *testing.T, size fleetSize)
	// publish releases id of apps, as CI would, and returns how long
	// publishing took (until the last CI job was done).
	publish(t *testing.T, apps []int, id string) time.Duration
	// teardown deletes the ApplicationSet and waits for its Applications
	// to go.
	teardown(t *testing.T)
	// appPrefix begins the names of this feed's Applications, which is
	// how Argo CD's logs tell them apart (isGeneration, isReconcile).
	appPrefix() string
	// set is the name of its ApplicationSet.
	set() string
}

func appName(i int) string { return fmt.Sprintf("app-%03d", i) }

// fleetManifest is one app's release: objects ConfigMaps, the last one
// labelled so that one list call shows which release each app runs.
func fleetManifest(i, objects int, id string) string {
	var b strings.Builder
	for k := range objects {
		if k > 0 {
			b.WriteString("---\n")
		}
		labels := ""
		if k == objects-1 {
			labels = fmt.Sprintf("  labels:\n    bench-last: \"true\"\n    bench-app: %s\n", appName(i))
		}
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\n%sdata:\n  release: %q\n  payload: %q\n", appName(i), k, labels, id, strings.Repeat("x", 200))
	}
	return b.String()
}

// deployedReleases lists which release each app of namespace runs.
func deployedReleases(namespace string) (map[string]string, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		} `json:"items"`
	}
	err := st.kube.get("/api/v1/namespaces/"+namespace+"/configmaps?labelSelector=bench-last%3Dtrue", &list)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, it := range list.Items {
		out[it.Metadata.Labels["bench-app"]] = it.Data["release"]
	}
	return out, nil
}

// waitReleased waits until every app of apps runs release id.
func waitReleased(t *testing.T, f feed, apps []int, id string, timeout time.Duration) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s: %d apps at %s", f.name(), len(apps), id), timeout, func() (bool, string) {
		got, err := deployedReleases(f.namespace())
		if err != nil {
			return false, err.Error()
		}
		var behind []int
		for _, i := range apps {
			if got[appName(i)] != id {
				behind = append(behind, i)
			}
		}
		if len(behind) == 0 {
			return true, ""
		}
		return false, fmt.Sprintf("%d of %d apps not at %s%s", len(behind), len(apps), id, describeApps(f, behind[:min(len(behind), 3)]))
	})
}

// describeApps says where Argo CD left the Applications of apps, so that
// a wait that fails names what held them. The bridge's generator names an
// Application after its app with a hash (appset.Name), so the set's
// Applications are matched by prefix.
func describeApps(f feed, apps []int) string {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			application
		} `json:"items"`
	}
	if err := st.kube.get("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications?labelSelector=bench-set%3D"+f.set(), &list); err != nil {
		return "; " + err.Error()
	}
	var b strings.Builder
	for _, i := range apps {
		name := f.appPrefix() + fmt.Sprintf("%03d", i)
		found := false
		for _, a := range list.Items {
			if a.Metadata.Name == name || strings.HasPrefix(a.Metadata.Name, name+"-") {
				fmt.Fprintf(&b, "; %s: %s", a.Metadata.Name, a.application)
				found = true
			}
		}
		if !found {
			fmt.Fprintf(&b, "; %s: no Application", name)
		}
	}
	return b.String()
}

func allApps(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// applicationSet creates name in argocd from its spec, as YAML.
func applicationSet(t *testing.T, name, spec string) {
	t.Helper()
	body := fmt.Sprintf("apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: %s\n  namespace: argocd\nspec:\n%s", name, spec)
	if err := st.kube.apply("/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets/"+name, []byte(body)); err != nil {
		t.Fatalf("ApplicationSet %s: %v", name, err)
	}
}

// deleteApplicationSet deletes name and waits for its Applications to go
// (their resources stay: preserveResourcesOnDeletion).
func deleteApplicationSet(t *testing.T, name string) {
	t.Helper()
	if err := st.kube.do(http.MethodDelete, "/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets/"+name, "", nil, nil); err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, "the Applications of "+name+" deleted", 5*time.Minute, func() (bool, string) {
		var list struct {
			Items []struct{} `json:"items"`
		}
		err := st.kube.get("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications?labelSelector=bench-set%3D"+name, &list)
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d left", len(list.Items))
	})
}

// clearNamespace deletes ns, and with it what a feed's Applications left
// in it, and waits until the cluster has finished deleting it.
func clearNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := st.kube.do(http.MethodDelete, "/api/v1/namespaces/"+ns, "", nil, nil); err != nil && !isNotFound(err) {
		t.Fatalf("delete namespace %s: %v", ns, err)
	}
	eventually(t, "namespace "+ns+" deleted", 10*time.Minute, func() (bool, string) {
		var got struct {
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		}
		err := st.kube.get("/api/v1/namespaces/"+ns, &got)
		switch {
		case isNotFound(err):
			return true, ""
		case err != nil:
			return false, err.Error()
		}
		return false, "phase " + got.Status.Phase
	})
}

// goTemplates reports whether the race's ApplicationSets render with Go
// templates; the template lever renders them with Argo CD's plain ones,
// which cost less each time an Application change requeues the set.
func goTemplates() bool { return !stackLevers.template }

func goTemplate() string { return fmt.Sprintf("  goTemplate: %v\n", goTemplates()) }

// param is a generator parameter in the race's template syntax, quoted.
func param(name string) string {
	if goTemplates() {
		return "'{{ ." + name + " }}'"
	}
	return "'{{" + name + "}}'"
}

// The template both feeds share: automated sync with prune, one
// namespace per feed, labelled for deleteApplicationSet.
func template(set, name, source, namespace, annotations string) string {
	return fmt.Sprintf(`  syncPolicy:
    preserveResourcesOnDeletion: true
  template:
    metadata:
      name: %s
      labels:
        bench-set: %s
%s    spec:
      project: default
      source:
%s      destination:
        server: https://kubernetes.default.svc
        namespace: %s
      syncPolicy:
        automated:
          prune: true
        syncOptions: [%s]
`, name, set, annotations, source, namespace, syncOptions())
}

// syncOptions are the race's Applications' sync options: the no-validate
// lever adds Validate=false (levers.go).
func syncOptions() string {
	if stackLevers.noValidate {
		return "CreateNamespace=true, Validate=false"
	}
	return "CreateNamespace=true"
}

// bucketopsFeed publishes with bucketops push, one CLI process per app as
// one CI job per app would, and the ApplicationSet uses the bridge's
// generator.
type bucketopsFeed struct{ workers, objects int }

func (*bucketopsFeed) name() string      { return fleet.Bucket }
func (*bucketopsFeed) namespace() string { return "bench-bucketops" }
func (*bucketopsFeed) appPrefix() string { return "bench-app-" }
func (*bucketopsFeed) set() string       { return "bench-bucketops" }

func (f *bucketopsFeed) setup(t *testing.T, size fleetSize) {
	f.objects = size.objects
	f.publish(t, allApps(size.apps), "r0")
	applicationSet(t, "bench-bucketops", goTemplate()+`  generators:
    - plugin:
        configMapRef:
          name: bucketops-generator
        input:
          parameters:
            prefix: bench
`+template("bench-bucketops", param("name"), `        repoURL: `+param("repoURL")+`
        targetRevision: `+param("targetRevision")+`
        path: `+param("path")+`
        plugin:
          name: bucketops
`, "bench-bucketops", ""))
}

func (f *bucketopsFeed) publish(t *testing.T, apps []int, id string) time.Duration {
	t.Helper()
	n := f.objects
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, len(apps))
	work := make(chan int)
	for range max(f.workers, 1) {
		wg.Go(func() {
			for i := range work {
				out, errOut, code := st.bucketops(fleetManifest(i, n, id), "push", "bench/"+appName(i), "-", "-m", id)
				if code != 0 {
					errs <- fmt.Sprintf("push bench/%s: exit %d: %s%s", appName(i), code, out, errOut)
				}
			}
		})
	}
	for _, i := range apps {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	return time.Since(start)
}

func (*bucketopsFeed) teardown(t *testing.T) { deleteApplicationSet(t, "bench-bucketops") }

// gitFeed publishes to a git monorepo, one directory per app, served by
// the real git http-backend, and tells Argo CD of each push with its
// GitHub webhook; paths sets argocd.argoproj.io/manifest-generate-paths.
type gitFeed struct {
	paths   bool
	server  *gitServer
	repo    string // the repository's name on the server
	setups  int    // setups so far: each has a repository of its own
	work    string // the CI's clone
	objects int
}

func (f *gitFeed) name() string {
	if f.paths {
		return fleet.GitPaths
	}
	return fleet.Git
}
func (f *gitFeed) set() string {
	if f.paths {
		return "bench-git-paths"
	}
	return "bench-git"
}
func (f *gitFeed) namespace() string { return f.set() }
func (f *gitFeed) appPrefix() string { return f.set() + "-app-" }
func (f *gitFeed) url() string       { return f.server.url + "/" + f.repo + ".git" }

func (f *gitFeed) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.work
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=ci", "GIT_AUTHOR_EMAIL=ci@example.com", "GIT_COMMITTER_NAME=ci", "GIT_COMMITTER_EMAIL=ci@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (f *gitFeed) setup(t *testing.T, size fleetSize) {
	f.objects = size.objects
	// A setup after a teardown (the race's streams) starts a new history,
	// which the previous repository would refuse as a non-fast-forward.
	f.repo = f.set()
	if f.setups > 0 {
		f.repo = fmt.Sprintf("%s-%d", f.set(), f.setups)
	}
	f.setups++
	f.work = filepath.Join(f.server.work, f.repo)
	if err := os.MkdirAll(f.work, 0o755); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(f.server.root, f.repo+".git")
	for _, args := range [][]string{{"init", "-q", "--bare", "-b", "main", bare}, {"-C", bare, "config", "http.receivepack", "true"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	f.git(t, "init", "-q", "-b", "main")
	f.git(t, "remote", "add", "origin", f.url())
	f.publish(t, allApps(size.apps), "r0")
	annotations := ""
	if f.paths {
		annotations = "      annotations:\n        argocd.argoproj.io/manifest-generate-paths: .\n"
	}
	name, path := "'"+f.set()+"-{{ .path.basename }}'", "'{{ .path.path }}'"
	if !goTemplates() {
		name, path = "'"+f.set()+"-{{path.basename}}'", "'{{path}}'"
	}
	applicationSet(t, f.set(), goTemplate()+fmt.Sprintf(`  generators:
    - git:
        repoURL: %s
        revision: main
        directories:
          - path: apps/*
`, f.url())+template(f.set(), name, fmt.Sprintf(`        repoURL: %s
        targetRevision: main
        path: %s
`, f.url(), path), f.namespace(), annotations))
}

// publish commits the apps' new release in one commit, pushes it over
// smart HTTP, and posts the GitHub push webhook to argocd-server.
func (f *gitFeed) publish(t *testing.T, apps []int, id string) time.Duration {
	t.Helper()
	start := time.Now()
	before := ""
	if out, err := exec.Command("git", "-C", f.work, "rev-parse", "-q", "--verify", "HEAD").Output(); err == nil {
		before = strings.TrimSpace(string(out))
	}
	var changed []string
	for _, i := range apps {
		rel := filepath.Join("apps", appName(i), "configmaps.yaml")
		p := filepath.Join(f.work, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fleetManifest(i, f.objects, id)), 0o644); err != nil {
			t.Fatal(err)
		}
		changed = append(changed, filepath.ToSlash(rel))
	}
	f.git(t, "add", "-A")
	f.git(t, "commit", "-q", "-m", id)
	f.git(t, "push", "-q", "origin", "HEAD:main")
	after := f.git(t, "rev-parse", "HEAD")
	published := time.Since(start)
	if before == "" {
		return published
	}
	payload, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": before, "after": after,
		"repository": map[string]any{"html_url": f.server.url + "/" + f.repo, "default_branch": "main"},
		"commits":    []any{map[string]any{"id": after, "modified": changed, "added": []string{}, "removed": []string{}}},
	})
	req, _ := http.NewRequest(http.MethodPost, "http://"+st.argocd+"/api/webhook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("argocd-server's webhook: %s", resp.Status)
	}
	f.server.hooks.Add(1)
	return published
}

// teardown deletes the ApplicationSet, then waits until argocd-server has
// handled every webhook posted so far and the refreshes they asked for.
// Argo CD 3.x queues webhooks and answers at once, then queues one refresh
// per Application a push touches (3.6: util/webhook's refreshQueue, 20
// workers), and a monorepo's stream leaves tens of thousands behind (each
// push refreshes every app): the next feed's webhooks and refreshes would
// wait behind them, as the git-paths stream of the 2026-12-07 races did.
// With the Applications gone each refresh fails at once; against live
// ones they drained at about 12 a second.
func (f *gitFeed) teardown(t *testing.T) {
	deleteApplicationSet(t, f.set())
	want := int(f.server.hooks.Load())
	eventually(t, "argocd-server handled the webhooks and their refreshes", 20*time.Minute, func() (bool, string) {
		w := readWebhookLog(f.appPrefix())
		return w.done(want), fmt.Sprintf("%+v, %d webhooks posted", w, want)
	})
}

// readWebhookLog reads argocd-server's log (webhookLog).
func readWebhookLog(appPrefix string) webhookLog {
	var w webhookLog
	for _, data := range processLogs("argocd-server") {
		for line := range strings.SplitSeq(string(data), "\n") {
			w.add(line, appPrefix)
		}
	}
	return w
}

// gitServer is the real git http-backend behind net/http/cgi, as a git
// host serves smart HTTP, on loopback. It runs in a process of its own
// (this test binary, started again with gitServerEnv), so that the race
// counts its CPU, its CGI processes' included, apart from the CI's.
type gitServer struct {
	root string // the repositories served
	work string // the CI's clones, which outlive the race's subtests
	url  string
	// hooks counts the push webhooks posted to argocd-server, which
	// answers before it handles them (readWebhookLog).
	hooks atomic.Int64
}

const (
	gitServerEnv     = "BUCKETOPS_E2E_GIT_SERVER"
	gitServerAddrEnv = "BUCKETOPS_E2E_GIT_ADDR"
)

func startGitServer(t *testing.T) *gitServer {
	t.Helper()
	g := &gitServer{root: t.TempDir(), work: t.TempDir()}
	p, ports, err := st.startOnPorts("git-http-backend", 1, func(ports []int) (*proc, error) {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		return st.start("git-http-backend", os.Args[0], nil, append(os.Environ(), gitServerEnv+"="+g.root, gitServerAddrEnv+"="+addr), st.dir)
	}, func(p *proc, ports []int) error {
		return waitFor("git-http-backend", p, 30*time.Second, listening(fmt.Sprintf("127.0.0.1:%d", ports[0])))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(5 * time.Second) })
	g.url = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	return g
}

// serveGit serves the repositories under root with git http-backend at
// addr until the process is stopped.
func serveGit(root, addr string) {
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		log.Fatalf("git is not installed: %v", err)
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	log.Fatal(http.ListenAndServe(addr, h))
}

// cost is what a feed cost the stack over a stretch of the race: manifest
// generations (the repo-server's log line for each fresh generation it
// caches, isGeneration), reconciliations of the feed's Applications by
// the application controller and of its ApplicationSet by the
// ApplicationSet controller, the ApplicationSet requeues its Applications
// caused, and the CPU seconds of every process of the stack, by name, with
// the children each reaped (the repo-server's git, the cmp-server's
// plugin, the git server's CGI). ciProcess is the CI side: the processes
// this test started and reaped to publish (bucketops push, or git commit
// and push).
type cost struct {
	generations      int
	reconciles       int
	appSetReconciles int
	appSetRequeues   int
	cpu              map[string]float64
}

const ciProcess = "CI (publishing)"

func measureCost(f feed) cost {
	c := cost{cpu: map[string]float64{ciProcess: childrenCPUSeconds(os.Getpid())}}
	for _, p := range st.running() {
		c.cpu[p.name] += cpuSeconds(p.cmd.Process.Pid)
		var match func(string) bool
		switch p.name {
		case "argocd-repo-server":
			match = func(l string) bool { return isGeneration(l, f.appPrefix()) }
		case "argocd-application-controller":
			match = func(l string) bool { return isReconcile(l, f.appPrefix()) }
		case "argocd-applicationset-controller":
			match = func(l string) bool { return isAppSetReconcile(l, f.set()) || isAppSetRequeue(l, f.appPrefix()) }
		default:
			continue
		}
		data, _ := os.ReadFile(p.log)
		for line := range strings.SplitSeq(string(data), "\n") {
			if !match(line) {
				continue
			}
			switch {
			case p.name == "argocd-repo-server":
				c.generations++
			case p.name == "argocd-application-controller":
				c.reconciles++
			case isAppSetReconcile(line, f.set()):
				c.appSetReconciles++
			default:
				c.appSetRequeues++
			}
		}
	}
	return c
}

func (c cost) minus(before cost) cost {
	out := cost{
		generations: c.generations - before.generations, reconciles: c.reconciles - before.reconciles,
		appSetReconciles: c.appSetReconciles - before.appSetReconciles, appSetRequeues: c.appSetRequeues - before.appSetRequeues,
		cpu: map[string]float64{},
	}
	for k, v := range c.cpu {
		out.cpu[k] = v - before.cpu[k]
	}
	return out
}

// stackCPU is the CPU of the stack's processes, the CI's publishing left
// out.
func (c cost) stackCPU() float64 {
	s := 0.0
	for k, v := range c.cpu {
		if k != ciProcess {
			s += v
		}
	}
	return s
}

// cpuSeconds is a process's user and system time, its reaped children's
// (the repo-server's git, the cmp-server's plugin) included.
func cpuSeconds(pid int) float64 { return procTicks(pid, 11, 12, 13, 14) } // utime stime cutime cstime

// childrenCPUSeconds is the user and system time of a process's reaped
// children only.
func childrenCPUSeconds(pid int) float64 { return procTicks(pid, 13, 14) }

// procTicks sums fields of /proc/PID/stat (numbered from the state, the
// field after the command name) in seconds.
func procTicks(pid int, fields ...int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	all := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ticks := 0.0
	for _, i := range fields {
		v, _ := strconv.ParseFloat(all[i], 64)
		ticks += v
	}
	return ticks / 100 // USER_HZ
}

// restWindow, restMargin and restLimit are how comeToRest waits.
const (
	restWindow = 15 * time.Second
	restMargin = 0.1 // cores
	restLimit  = 5 * time.Minute
)

// comeToRest waits until the stack's CPU has stopped falling: window by
// window, until a window's is no more than restMargin below the quietest
// before it and the stack leaves most of the machine free (fleet.AtRest),
// or restLimit has passed. Work a setup set off (comparisons,
// refreshes, a previous feed's leftovers) drains first, so that a stream
// doesn't pay for it; the steady load that remains (Argo CD's timer
// comparing the apps) every stream pays alike. Periodic load stops the
// wait as soon as a window is no quieter than one before it.
func comeToRest(t *testing.T) fleet.Rest {
	t.Helper()
	sample := func() map[string]float64 {
		cpu := map[string]float64{}
		for _, p := range st.running() {
			cpu[p.name] += cpuSeconds(p.cmd.Process.Pid)
		}
		return cpu
	}
	var rest fleet.Rest
	quietest := math.Inf(1)
	start, prev := time.Now(), sample()
	for n := 0; ; n++ {
		time.Sleep(restWindow)
		now := sample()
		cores, busiest, busiestCores := 0.0, "", 0.0
		for name, v := range now {
			c := (v - prev[name]) / restWindow.Seconds()
			cores += c
			if c > busiestCores {
				busiest, busiestCores = name, c
			}
		}
		prev = now
		rest.Wait, rest.Last = time.Since(start), cores
		if n == 0 {
			rest.First, rest.Busiest, rest.BusiestCores = cores, busiest, busiestCores
		}
		t.Logf("the stack at rest? %.2f cores over the last %s (the busiest: %s, %.2f)", cores, restWindow, busiest, busiestCores)
		if fleet.AtRest(cores, quietest, restMargin, runtime.NumCPU()) {
			rest.Settled = true
			return rest
		}
		if rest.Wait >= restLimit {
			return rest
		}
		quietest = min(quietest, cores)
	}
}

// runBurst releases every app of f at once and measures it; others are
// the feeds whose Applications sit idle in the cluster meanwhile.
func runBurst(t *testing.T, f feed, others []feed, size fleetSize, id string) fleet.Burst {
	t.Helper()
	before, idle := measureCost(f), reconcilesOf(others)
	stopProfile := func() error { return nil }
	if dir := os.Getenv(profileEnv); dir != "" && id == "b1" {
		stopProfile = st.profile(filepath.Join(dir, f.set()))
	}
	start := time.Now()
	pub := f.publish(t, allApps(size.apps), id)
	waitReleased(t, f, allApps(size.apps), id, 20*time.Minute)
	live := time.Since(start)
	if err := stopProfile(); err != nil {
		t.Errorf("%s: profiling: %v", profileEnv, err)
	}
	// Let comparisons the sync set off settle before counting.
	time.Sleep(5 * time.Second)
	c := measureCost(f).minus(before)
	return fleet.Burst{Live: live, Publish: pub, Cost: c.report(), IdleReconciles: reconcilesOf(others) - idle}
}

// reconcilesOf is the application controller's reconciliations so far of
// feeds' Applications, read in one pass over its log.
func reconcilesOf(feeds []feed) int {
	n := 0
	for _, data := range processLogs("argocd-application-controller") {
		for line := range strings.SplitSeq(string(data), "\n") {
			if slices.ContainsFunc(feeds, func(f feed) bool { return isReconcile(line, f.appPrefix()) }) {
				n++
			}
		}
	}
	return n
}

// processLogs reads the logs of the stack's running processes called
// name; a log that can't be read counts as empty.
func processLogs(name string) [][]byte {
	var out [][]byte
	for _, p := range st.running() {
		if p.name == name {
			data, _ := os.ReadFile(p.log)
			out = append(out, data)
		}
	}
	return out
}

func runStream(t *testing.T, f feed, size fleetSize) fleet.Stream {
	t.Helper()
	type pending struct {
		app   string
		id    string
		start time.Time
	}
	var (
		mu   sync.Mutex
		open []pending
		res  fleet.Stream
	)
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			got, err := deployedReleases(f.namespace())
			now := time.Now()
			if err == nil {
				mu.Lock()
				kept := open[:0]
				for _, p := range open {
					// A later release of the same app supersedes it.
					if v := got[p.app]; v == p.id || (v > p.id && strings.HasPrefix(v, "s")) {
						res.Latencies = append(res.Latencies, now.Sub(p.start))
					} else {
						kept = append(kept, p)
					}
				}
				open = kept
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	before := measureCost(f)
	rng := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(time.Second)
	end := time.Now().Add(size.stream)
	for n := 0; time.Now().Before(end); n++ {
		i := rng.IntN(size.apps)
		id := fmt.Sprintf("s%06d", n)
		start := time.Now()
		mu.Lock()
		open = append(open, pending{appName(i), id, start})
		mu.Unlock()
		res.Publish = append(res.Publish, f.publish(t, []int{i}, id))
		res.Releases++
		<-tick.C
	}
	tick.Stop()
	grace := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		left := len(open)
		mu.Unlock()
		if left == 0 || time.Now().After(grace) {
			break
		}
		time.Sleep(time.Second)
	}
	close(done)
	<-watched
	mu.Lock()
	res.Missed = len(open)
	mu.Unlock()
	res.Cost = measureCost(f).minus(before).report()
	return res
}

func (c cost) report() fleet.Cost {
	return fleet.Cost{
		Generations: c.generations, CPU: c.stackCPU(), Processes: c.cpu,
		Reconciles: c.reconciles, AppSetReconciles: c.appSetReconciles, AppSetRequeues: c.appSetRequeues,
	}
}

// race runs the feeds on one stack, and its order is what keeps the
// comparison fair:
//   - setup: each feed's ApplicationSet, one after another, each waited for
//     until every app runs r0;
//   - bursts: in rounds, round b running every feed's burst b in an order
//     rotated by one each round, so that no feed always goes first on a
//     fresh stack or last on a tired one, and the machine's drift over the
//     run falls on every feed alike. The other feeds' Applications stay in
//     the cluster, idle, and Argo CD compares them on its timer during
//     every feed's bursts alike; each burst counts those reconciliations;
//   - streams: every feed is torn down (with clear, its namespace deleted
//     too, so that the resources preserveResourcesOnDeletion keeps leave
//     the cluster and Argo CD's cluster cache), then each feed in turn is
//     set up again alone, waits for the stack to come to rest
//     (comeToRest), streams and is torn down, so that a stream's cost per
//     release is of that feed only.
//
// A feed whose setup fails is left out of what follows.
func race(t *testing.T, size fleetSize, feeds []feed, clear bool) []fleet.Feed {
	results := make([]fleet.Feed, len(feeds))
	for i, f := range feeds {
		results[i].Name = f.name()
	}
	setup := func(t *testing.T, f feed) {
		start := time.Now()
		f.setup(t, size)
		waitReleased(t, f, allApps(size.apps), "r0", 20*time.Minute)
		t.Logf("%s: %d apps deployed in %s", f.name(), size.apps, time.Since(start).Round(time.Second))
	}
	teardown := func(t *testing.T, f feed) {
		f.teardown(t)
		if clear {
			clearNamespace(t, f.namespace())
		}
	}
	if size.bursts > 0 {
		var up []int // indexes of the feeds set up
		for i, f := range feeds {
			if t.Run("setup "+f.name(), func(t *testing.T) { setup(t, f) }) {
				up = append(up, i)
			}
		}
		for b := range size.bursts {
			for k := range up {
				i := up[(b+k)%len(up)]
				f := feeds[i]
				var others []feed
				for _, j := range up {
					if j != i {
						others = append(others, feeds[j])
					}
				}
				t.Run(fmt.Sprintf("burst %d %s", b+1, f.name()), func(t *testing.T) {
					br := runBurst(t, f, others, size, fmt.Sprintf("b%d", b+1))
					t.Logf("%s burst %d: live in %s (publish %s), %d generations, %.1f CPU s, %d reconciliations of the other feeds' apps", f.name(), b+1, br.Live.Round(100*time.Millisecond), br.Publish.Round(10*time.Millisecond), br.Generations, br.CPU, br.IdleReconciles)
					results[i].Bursts = append(results[i].Bursts, br)
				})
			}
		}
		for _, i := range up {
			t.Run("teardown "+feeds[i].name(), func(t *testing.T) { teardown(t, feeds[i]) })
		}
	}
	if size.stream > 0 {
		for i, f := range feeds {
			t.Run("stream "+f.name(), func(t *testing.T) {
				setup(t, f)
				rest := comeToRest(t)
				hooks := readWebhookLog(f.appPrefix())
				sr := runStream(t, f, size)
				sr.Rest = &rest
				if w := readWebhookLog(f.appPrefix()); w.Received > hooks.Received {
					t.Logf("%s stream: argocd-server moved the cached manifests of untouched apps %d times, and couldn't %d times", f.name(), w.Moved-hooks.Moved, w.Missed-hooks.Missed)
				}
				t.Logf("%s stream: %d releases, p50 %s, p99 %s, %d missed, %d generations, %.1f CPU s", f.name(), sr.Releases, fleet.Percentile(sr.Latencies, 50), fleet.Percentile(sr.Latencies, 99), sr.Missed, sr.Generations, sr.CPU)
				results[i].Stream = &sr
				teardown(t, f)
			})
		}
	}
	return results
}

// TestFleet is the small race in make e2e: 20 apps, one burst, each feed.
// It checks that every app of every feed goes live, from the
// ApplicationSet's first generation and after a burst; it asserts no
// timing.
func TestFleet(t *testing.T) {
	git := startGitServer(t)
	size := fleetSize{apps: 20, objects: 10, bursts: 1}
	results := race(t, size, []feed{&gitFeed{server: git, paths: true}, &bucketopsFeed{workers: 4}}, false)
	for _, r := range results {
		if len(r.Bursts) != 1 || r.Bursts[0].Generations == 0 {
			t.Errorf("%s: %+v: a burst with no manifest generation counted", r.Name, r.Bursts)
		}
	}
	// Teardown deleted the feed's ApplicationSet and with it its
	// Applications; preserveResourcesOnDeletion kept their resources.
	if got, err := deployedReleases("bench-bucketops"); err != nil || got[appName(0)] != "b1" {
		t.Errorf("bench-bucketops after teardown: %v %v, want the resources kept", got, err)
	}
	if len(results) == 2 && len(results[0].Bursts) == 1 && len(results[1].Bursts) == 1 {
		t.Logf("burst of %d apps live: git %s, bucketops %s", size.apps, results[0].Bursts[0].Live, results[1].Bursts[0].Live)
	}
}

// TestFleetBench is make bench-argocd: the whole race, its report
// written to BENCH_ARGOCD_OUT (JSON) and, with BENCH_ARGOCD_DOC, into its
// section of that doc and the chart BENCH_ARGOCD_CHART, and with
// BENCH_ARGOCD_README into that README's headline paragraph.
func TestFleetBench(t *testing.T) {
	out := os.Getenv("BENCH_ARGOCD_OUT")
	if out == "" {
		t.Skip("make bench-argocd runs this (BENCH_ARGOCD_OUT)")
	}
	size := fleetSize{apps: 200, objects: 10, bursts: 3, stream: 3 * time.Minute}
	for env, set := range map[string]func(string) error{
		"BENCH_ARGOCD_APPS":   func(v string) (err error) { size.apps, err = strconv.Atoi(v); return },
		"BENCH_ARGOCD_BURSTS": func(v string) (err error) { size.bursts, err = strconv.Atoi(v); return },
		"BENCH_ARGOCD_STREAM": func(v string) (err error) { size.stream, err = time.ParseDuration(v); return },
	} {
		if v := os.Getenv(env); v != "" {
			if err := set(v); err != nil {
				t.Fatalf("%s=%q: %v", env, v, err)
			}
		}
	}
	git := startGitServer(t)
	all := []feed{&gitFeed{server: git}, &gitFeed{server: git, paths: true}, &bucketopsFeed{workers: 8}}
	racing := all
	if names := os.Getenv("BENCH_ARGOCD_FEEDS"); names != "" {
		// Some feeds only, by name: git, git-paths, bucketops.
		racing = nil
		for n := range strings.SplitSeq(names, ",") {
			i := slices.Index([]string{"git", "git-paths", "bucketops"}, strings.TrimSpace(n))
			if i < 0 {
				t.Fatalf("BENCH_ARGOCD_FEEDS: %q is not a feed; use git, git-paths, bucketops", n)
			}
			racing = append(racing, all[i])
		}
	}
	started := time.Now()
	feeds := race(t, size, racing, true)
	report := fleet.Report{
		Apps: size.apps, Objects: size.objects, Bursts: size.bursts, Stream: size.stream,
		Took: time.Since(started), CPUs: runtime.NumCPU(), Date: time.Now().UTC().Format("2006-01-02"),
		ArgoCD: versions.argocd, Reconciliation: reconciliation(), Levers: stackLevers.names(), Feeds: feeds, Interleaved: true,
	}
	data, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if doc := os.Getenv("BENCH_ARGOCD_DOC"); doc != "" {
		chart := os.Getenv("BENCH_ARGOCD_CHART")
		link, _ := filepath.Rel(filepath.Dir(doc), chart)
		if err := fleet.Write(report, doc, chart, filepath.ToSlash(link)); err != nil {
			t.Fatal(err)
		}
		if readme := os.Getenv("BENCH_ARGOCD_README"); readme != "" {
			rel, _ := filepath.Rel(filepath.Dir(readme), doc)
			if err := fleet.WriteReadme(report, readme, filepath.ToSlash(rel)+"#a-fleet-on-the-real-argo-cd-git-monorepo-against-bucketops"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range feeds {
		if len(f.Bursts) != size.bursts {
			t.Errorf("%s: %d bursts measured, want %d", f.Name, len(f.Bursts), size.bursts)
		}
	}
}
