//go:build e2e

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRevisions runs issue 15's scenarios: each release is a revision Argo
// CD knows, through the bridge's git view, with no git repository anywhere.
func TestRevisions(t *testing.T) {
	const app, ns = "prod/rev", "rev"
	createApplication(t, "rev", app, ns)
	logOf := func(t *testing.T, app string) []releaseLog {
		t.Helper()
		out, errOut, code := st.bucketops("", "log", app, "-o", "json")
		if code != 0 {
			t.Fatalf("log: %s%s", out, errOut)
		}
		var l []releaseLog
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	revisionIs := func(name, sha string) func() (bool, string) {
		return func() (bool, string) {
			a, err := st.kube.application(name)
			if err != nil {
				return false, err.Error()
			}
			return a.Status.Sync.Revision == sha && a.Status.Sync.Status == "Synced", fmt.Sprintf("revision %s %s, want %s Synced", a.Status.Sync.Revision, a.Status.Sync.Status, sha)
		}
	}

	t.Run("1 a release is synced at its own commit", func(t *testing.T) {
		if out, code := push(t, app, release(t, ns, "r1", ""), "--sequence", "1"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		head := logOf(t, app)[0]
		eventually(t, "the Application at the release's commit", 30*time.Second, revisionIs("rev", head.Commit))
	})

	t.Run("2 three releases are three revisions in Argo CD's History", func(t *testing.T) {
		for i := 2; i <= 3; i++ {
			if out, code := push(t, app, release(t, ns, fmt.Sprintf("r%d", i), ""), "--sequence", strconv.Itoa(i)); code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
		}
		commits := map[string]bool{}
		for _, r := range logOf(t, app) {
			commits[r.Commit] = true
		}
		eventually(t, "three revisions in History", 30*time.Second, func() (bool, string) {
			a, _ := st.kube.application("rev")
			seen := map[string]bool{}
			for _, h := range a.Status.History {
				if commits[h.Revision] {
					seen[h.Revision] = true
				}
			}
			return len(seen) >= 3, fmt.Sprintf("history %+v", a.Status.History)
		})
	})

	t.Run("3 Argo CD's rollback to the first History entry brings the first release back", func(t *testing.T) {
		a, err := st.kube.application("rev")
		if err != nil || len(a.Status.History) == 0 {
			t.Fatalf("history: %+v %v", a.Status.History, err)
		}
		first := a.Status.History[0]
		if err := st.argoREST(http.MethodPost, "/api/v1/applications/rev/rollback", map[string]any{"id": first.ID}, nil); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the first release's value", 60*time.Second, hasValue(t, ns, "r1"))
		var gen int64
		for _, r := range logOf(t, app) {
			if r.Commit == first.Revision {
				gen = r.Generation
			}
		}
		out, errOut, code := st.bucketops("", "wait", app, "--generation", strconv.FormatInt(gen, 10), "--wait-timeout", "60s")
		if code != 0 || !strings.Contains(out+errOut, "live") {
			t.Errorf("wait for the rolled-back-to release: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("4 one manifest generation per release, none for a refresh without one", func(t *testing.T) {
		before := renders(t)
		if out, code := push(t, app, release(t, ns, "r4", ""), "--sequence", "4"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		eventually(t, "r4 deployed", 30*time.Second, hasValue(t, ns, "r4"))
		if n := renders(t) - before; n != 1 {
			t.Errorf("%d manifest generations for one release of one Application, want 1", n)
		}
		// argocd-server answers a refresh once the controller has
		// refreshed the Application.
		if err := st.argoREST(http.MethodGet, "/api/v1/applications/rev?refresh=normal", nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // and a generation it started would have reached the bridge
		if n := renders(t) - before; n != 1 {
			t.Errorf("a refresh with no new release generated manifests (%d generations in all, want 1)", n-1)
		}
	})

	t.Run("5 a pinned Application stays on its commit while releases land", func(t *testing.T) {
		const pinApp, pinNS = "prod/pinned", "pinned"
		if out, errOut, code := st.bucketops("", "push", pinApp, release(t, pinNS, "p1", ""), "--sequence", "1"); code != 0 {
			t.Fatalf("push: %s%s", out, errOut)
		}
		pin := logOf(t, pinApp)[0].Commit
		createApplicationAt(t, "pinned", pinApp, pinNS, pin)
		eventually(t, "the pinned release deployed", 60*time.Second, hasValue(t, pinNS, "p1"))
		out, errOut, code := st.bucketops("", "push", pinApp, release(t, pinNS, "p2", ""), "--sequence", "2", "--wait", "--wait-timeout", "60s")
		if code != 5 || !strings.Contains(errOut, "pinned to generation") {
			t.Errorf("push --wait to a pinned app: exit %d, want 5 naming the pin\n%s%s", code, out, errOut)
		}
		time.Sleep(5 * time.Second) // the bridge's refresh and Argo CD's comparison have run
		if ok, detail := hasValue(t, pinNS, "p1")(); !ok {
			t.Errorf("the pinned Application moved: %s", detail)
		}
		if ok, detail := revisionIs("pinned", pin)(); !ok {
			t.Errorf("the pinned Application: %s", detail)
		}
	})

	t.Run("6 two bridge replicas serve the same commits and status, and Argo CD keeps syncing when one is killed", func(t *testing.T) {
		replica, addr, err := st.startReplica("bucketops-bridge-2")
		if err != nil {
			t.Fatal(err)
		}
		st.lb.set(st.bridgePort, addr)
		t.Cleanup(func() { st.lb.set(st.bridgePort) })
		token := strings.TrimSpace(readFile(t, st.path("bridge.token")))
		heads := map[string]bool{}
		statuses := map[string]bool{}
		gen := strconv.FormatInt(logOf(t, app)[0].Generation, 10)
		for _, a := range []string{st.bridgePort, addr} {
			u := url.URL{Scheme: "http", Host: a, Path: "/git/" + app + ".git", User: url.UserPassword("bucketops", token)}
			out, err := exec.Command("git", "ls-remote", u.String(), "refs/heads/main").Output()
			if err != nil {
				t.Fatalf("ls-remote %s: %v", a, err)
			}
			heads[strings.Fields(string(out))[0]] = true
			req, _ := http.NewRequest(http.MethodGet, "http://"+a+"/v1/apps/"+app+"/-/status?generation="+gen, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var s struct {
				State        string
				Applications []struct {
					Compared int64 `json:"compared_generation"`
				}
			}
			json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
			statuses[fmt.Sprintf("%s %+v", s.State, s.Applications)] = true
		}
		if len(heads) != 1 || len(statuses) != 1 {
			t.Errorf("the replicas differ: heads %v, statuses %v", heads, statuses)
		}
		if out, code := push(t, app, release(t, ns, "r6", ""), "--sequence", "6"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if c := st.lb.counts(); c[addr] == 0 {
			t.Errorf("the second replica answered nothing: %v", c)
		}
		replica.stop(10 * time.Second)
		if out, code := push(t, app, release(t, ns, "r7", ""), "--sequence", "7"); code != 0 {
			t.Fatalf("with a replica killed: exit %d:\n%s", code, out)
		}
		eventually(t, "r7 deployed", 30*time.Second, hasValue(t, ns, "r7"))
	})

	t.Run("7 a user clones an app's history with git and the reader token", func(t *testing.T) {
		token := strings.TrimSpace(readFile(t, st.path("bridge.token")))
		u := url.URL{Scheme: "http", Host: st.bridgeAddr, Path: "/git/" + app + ".git", User: url.UserPassword("auditor", token)}
		dir := t.TempDir()
		if out, err := exec.Command("git", "clone", "-q", u.String(), dir+"/c").CombinedOutput(); err != nil {
			t.Fatalf("clone: %v %s", err, out)
		}
		out, err := exec.Command("git", "-C", dir+"/c", "log", "--format=%an|%s").Output()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(logOf(t, app)) || !strings.Contains(lines[0], "|Publish "+app+"@") {
			t.Errorf("git log:\n%s", out)
		}
	})
}

type releaseLog struct {
	Generation int64  `json:"generation"`
	Commit     string `json:"commit"`
}

// createApplicationAt makes an Application pinned to a commit of app's git
// view, syncing itself.
func createApplicationAt(t *testing.T, name, app, namespace, revision string) {
	t.Helper()
	body := fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: %s
  namespace: argocd
spec:
  project: default
  source:
    repoURL: %s
    targetRevision: %s
    path: .
    plugin:
      name: bucketops
  destination:
    server: https://kubernetes.default.svc
    namespace: %s
  syncPolicy:
    automated: {}
    syncOptions: [CreateNamespace=true]
`, name, st.gitViewURL(app), revision, namespace)
	if err := st.kube.apply("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/"+name, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

// renders counts the manifests the (first) bridge replica served: one per
// plugin generation.
func renders(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + st.bridgePort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `bucketops_renders_total{outcome="ok"} `); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
