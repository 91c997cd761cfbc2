//go:build e2e

package integration

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/bucketops/bucketops/render/sopstest"
)

var (
	st        *stack
	recipient string
	timings   = &timingLog{}
)

// TestMain builds the stack's binaries (cached by version), starts the
// stack once for every scenario, and stops every process by PID at the
// end, whatever happened.
func TestMain(m *testing.M) {
	if root := os.Getenv(gitServerEnv); root != "" {
		// This binary started as the fleet race's git server.
		serveGit(root, os.Getenv(gitServerAddrEnv))
		return
	}
	var err error
	logDir := os.Getenv("BUCKETOPS_E2E_LOGS")
	if logDir == "" {
		logDir, _ = os.MkdirTemp("", "bucketops-e2e-logs-")
	}
	os.MkdirAll(logDir, 0o755)
	logf := func(format string, args ...any) { log.Printf("e2e: "+format, args...) }
	logf("process logs in %s", logDir)

	if versions, err = pickStack(os.Getenv("ARGOCD_VERSION")); err != nil {
		log.Fatalf("e2e: %v", err)
	}
	logf("Argo CD %s, Kubernetes %s, etcd %s", versions.argocd, versions.kube, versions.etcd)
	if stackLevers, err = parseLevers(os.Getenv("BENCH_ARGOCD_LEVERS")); err != nil {
		log.Fatalf("e2e: %v", err)
	}
	benchMode = os.Getenv("BENCH_ARGOCD_OUT") != ""
	logf("levers on: %v; Argo CD's default reconciliation: %v", stackLevers.names(), benchMode)
	bins, err := binaries(logf)
	if err != nil {
		log.Fatalf("e2e: %v", err)
	}
	if os.Getenv("BUCKETOPS_E2E_BUILD_ONLY") != "" {
		logf("binaries ready: %v", bins)
		os.Exit(0)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		log.Fatal(err)
	}
	recipient = id.Recipient().String()
	keyFile := filepath.Join(logDir, "age-keys.txt")
	if err := os.WriteFile(keyFile, sopstest.KeyFile(id), 0o600); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	st, err = startStack(bins, keyFile, logDir, logf)
	if err != nil {
		log.Printf("e2e: starting the stack: %v", err)
		os.Exit(1)
	}
	logf("stack up in %s", time.Since(start).Round(100*time.Millisecond))
	code := m.Run()
	st.stop()
	timings.print()
	if code == 0 && os.Getenv("BUCKETOPS_E2E_LOGS") == "" {
		os.RemoveAll(logDir)
	} else {
		logf("process logs kept in %s", logDir)
	}
	os.Exit(code)
}

// timingLog collects push-to-Synced times per scenario.
type timingLog struct {
	mu   sync.Mutex
	rows []string
}

func (l *timingLog) add(scenario string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rows = append(l.rows, fmt.Sprintf("%-48s %6.1fs", scenario, d.Seconds()))
}

func (l *timingLog) print() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Println("\npush to Synced, per scenario:")
	for _, r := range l.rows {
		fmt.Println("  " + r)
	}
}

// createApplication makes an Argo CD Application for app through the API
// server: the bridge's git view of app at main, plugin bucketops (no
// parameter: the revision names the release), automated sync off (the
// bridge's --sync does it).
func createApplication(t *testing.T, name, app, namespace string) {
	t.Helper()
	applyApplication(t, name, app, namespace, "")
}

// createAutomatedApplication is createApplication with automated sync,
// pruning, as an ApplicationSet's Applications usually have: the bridge
// syncs it rather than refreshing it (sync-first).
func createAutomatedApplication(t *testing.T, name, app, namespace string) {
	t.Helper()
	applyApplication(t, name, app, namespace, "\n    automated: {prune: true}")
}

// applyApplication applies createApplication's Application, with policy
// added to its syncPolicy.
func applyApplication(t *testing.T, name, app, namespace, policy string) {
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
    targetRevision: main
    path: .
    plugin:
      name: bucketops
  destination:
    server: https://kubernetes.default.svc
    namespace: %s
  syncPolicy:
    syncOptions: [CreateNamespace=true]%s
`, name, st.gitViewURL(app), namespace, policy)
	if err := st.kube.apply("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/"+name, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func configMap(namespace, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, namespace, value)
}

// release writes an app directory: a ConfigMap and, if secret isn't empty,
// a SOPS-encrypted Secret.
func release(t *testing.T, namespace, value, secret string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "configmap.yaml"), []byte(configMap(namespace, "settings", value)), 0o644)
	if secret != "" {
		plain := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: credentials\n  namespace: %s\nstringData:\n  password: %s\n", namespace, secret)
		os.WriteFile(filepath.Join(dir, "secret.yaml"), sopstest.EncryptSecret(t, plain, recipient), 0o644)
	}
	return dir
}

// push publishes dir as app and waits for the deploy; it returns the
// output and exit code.
func push(t *testing.T, app, dir string, extra ...string) (string, int) {
	t.Helper()
	args := append([]string{"push", app, dir, "--wait", "--wait-timeout", "60s"}, extra...)
	out, errOut, code := st.bucketops("", args...)
	t.Logf("bucketops %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	return out + errOut, code
}

// eventually polls check until it holds or timeout.
func eventually(t *testing.T, what string, timeout time.Duration, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, detail)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func hasValue(t *testing.T, namespace, want string) func() (bool, string) {
	return func() (bool, string) {
		d, err := st.kube.configMapData(namespace, "settings")
		if err != nil {
			return false, err.Error()
		}
		return d["value"] == want, fmt.Sprintf("ConfigMap %s/settings value %q, want %q", namespace, d["value"], want)
	}
}

// TestScenarios runs issue 5's scenarios in order against one stack.
func TestScenarios(t *testing.T) {
	var firstGen string
	// Every scenario runs on its own too (make e2e E2E_RUN=TestScenarios/^3_):
	// what it needs from the ones before, it makes itself.
	payments := func(t *testing.T) { createApplication(t, "payments", "prod/payments", "payments") }
	t.Run("1 push deploys a ConfigMap and a SOPS Secret", func(t *testing.T) {
		payments(t)
		start := time.Now()
		out, code := push(t, "prod/payments", release(t, "payments", "one", "s3cr3t"), "--sequence", "1")
		if code != 0 {
			t.Fatalf("push --wait exit %d:\n%s", code, out)
		}
		timings.add("1 ConfigMap and SOPS Secret", time.Since(start))
		if ok, detail := hasValue(t, "payments", "one")(); !ok {
			t.Fatal(detail)
		}
		sec, err := st.kube.secretData("payments", "credentials")
		if err != nil || sec["password"] != "s3cr3t" {
			t.Fatalf("Secret payments/credentials: %v %v, want the decrypted password", sec, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("push to Synced and Healthy took %s, the scenario allows 30s", d)
		}
		a, _ := st.kube.application("payments")
		if a.Status.Sync.Status != "Synced" || a.Status.Health.Status != "Healthy" {
			t.Errorf("Application payments: %s/%s", a.Status.Sync.Status, a.Status.Health.Status)
		}
		firstGen = generationIn(out)
	})

	t.Run("2 a second push changes the value", func(t *testing.T) {
		payments(t)
		start := time.Now()
		if out, code := push(t, "prod/payments", release(t, "payments", "two", "s3cr3t"), "--sequence", "2"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		timings.add("2 second push", time.Since(start))
		eventually(t, "value two", 10*time.Second, hasValue(t, "payments", "two"))
	})

	t.Run("3 rollback to the first generation", func(t *testing.T) {
		payments(t)
		if firstGen == "" {
			out, code := push(t, "prod/payments", release(t, "payments", "one", "s3cr3t"))
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			firstGen = generationIn(out)
			if out, code := push(t, "prod/payments", release(t, "payments", "two", "s3cr3t")); code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
		}
		start := time.Now()
		out, errOut, code := st.bucketops("", "rollback", "prod/payments", "--to", firstGen)
		if code != 0 {
			t.Fatalf("rollback exit %d: %s%s", code, out, errOut)
		}
		out, errOut, code = st.bucketops("", "wait", "prod/payments", "--wait-timeout", "60s")
		if code != 0 {
			t.Fatalf("wait exit %d: %s%s", code, out, errOut)
		}
		timings.add("3 rollback", time.Since(start))
		eventually(t, "value one again", 10*time.Second, hasValue(t, "payments", "one"))
	})

	t.Run("4 twenty apps pushed concurrently converge on their highest sequence", func(t *testing.T) {
		const apps, pushes = 20, 3
		for i := range apps {
			createApplication(t, fmt.Sprintf("team-%02d", i), fmt.Sprintf("prod/team-%02d", i), fmt.Sprintf("team-%02d", i))
		}
		start := time.Now()
		var wg sync.WaitGroup
		for i := range apps {
			for p := 1; p <= pushes; p++ {
				wg.Go(func() {
					ns := fmt.Sprintf("team-%02d", i)
					dir := release(t, ns, fmt.Sprintf("v%d", p), "")
					st.bucketops("", "push", "prod/"+ns, dir, "--sequence", fmt.Sprint(p))
				})
			}
		}
		wg.Wait()
		for i := range apps {
			ns := fmt.Sprintf("team-%02d", i)
			eventually(t, ns+" at its highest sequence", 120*time.Second, hasValue(t, ns, fmt.Sprintf("v%d", pushes)))
		}
		timings.add("4 twenty apps, concurrent pushes (last Synced)", time.Since(start))
	})

	t.Run("5 fail closed: a tampered release prunes nothing", func(t *testing.T) {
		payments(t)
		if out, code := push(t, "prod/payments", release(t, "payments", "before", "s3cr3t")); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		// Corrupt the head behind bucketops' back: the bytes no longer
		// match the digest in the object's metadata.
		out, errOut, code := st.bucketops("", "show", "prod/payments", "--raw")
		if code != 0 {
			t.Fatalf("show: %s%s", out, errOut)
		}
		if err := tamper(st, "prod/payments", strings.Replace(out, `"before"`, `"evil"`, 1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "ComparisonError", 60*time.Second, func() (bool, string) {
			a, err := st.kube.application("payments")
			if err != nil {
				return false, err.Error()
			}
			for _, c := range a.Status.Conditions {
				if c.Type == "ComparisonError" {
					return strings.Contains(c.Message, "digest"), c.Message
				}
			}
			return false, fmt.Sprintf("conditions %+v", a.Status.Conditions)
		})
		// Nothing pruned, nothing changed.
		if ok, detail := hasValue(t, "payments", "before")(); !ok {
			t.Error(detail)
		}
		if sec, _ := st.kube.secretData("payments", "credentials"); sec == nil {
			t.Error("the Secret was pruned")
		}
		// A good release heals it.
		if out, code := push(t, "prod/payments", release(t, "payments", "after", "s3cr3t")); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		eventually(t, "healed", 10*time.Second, hasValue(t, "payments", "after"))
	})

	t.Run("6 retire prunes the app", func(t *testing.T) {
		createApplication(t, "retired", "prod/retired", "retired")
		if out, code := push(t, "prod/retired", release(t, "retired", "here", "")); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		start := time.Now()
		out, errOut, code := st.bucketops("", "retire", "prod/retired", "-m", "gone")
		if code != 0 {
			t.Fatalf("retire: %s%s", out, errOut)
		}
		eventually(t, "ConfigMap pruned", 60*time.Second, func() (bool, string) {
			d, err := st.kube.configMapData("retired", "settings")
			return err == nil && d == nil, fmt.Sprintf("%v %v", d, err)
		})
		timings.add("6 retire (pruned)", time.Since(start))
	})

	t.Run("7 a release the API server rejects fails push --wait", func(t *testing.T) {
		createApplication(t, "broken", "prod/broken", "broken")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(configMap("broken", "Bad_Name", "x")), 0o644)
		start := time.Now()
		out, code := push(t, "prod/broken", dir)
		if code != 5 {
			t.Fatalf("exit %d, want 5:\n%s", code, out)
		}
		if !strings.Contains(out, "Bad_Name") {
			t.Errorf("no Argo CD message naming the object:\n%s", out)
		}
		timings.add("7 rejected release (failed)", time.Since(start))
	})

	t.Run("8 polling alone deploys when notifications are off", func(t *testing.T) {
		payments(t)
		if err := st.restartBridge("--local-pubsub=false", "--poll-interval", "2s"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if out, code := push(t, "prod/payments", release(t, "payments", "polled", "s3cr3t")); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		timings.add("8 polling only", time.Since(start))
		eventually(t, "value polled", 10*time.Second, hasValue(t, "payments", "polled"))
	})
}

// generationIn finds APP@GEN in push output.
func generationIn(out string) string {
	for _, f := range strings.Fields(out) {
		if _, gen, ok := strings.Cut(f, "@"); ok && gen != "" && strings.Trim(gen, "0123456789") == "" {
			return gen
		}
	}
	return ""
}
