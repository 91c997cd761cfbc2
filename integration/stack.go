//go:build e2e

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// stack is etcd, kube-apiserver, kube-controller-manager, redis, Argo CD
// (server, repo-server, our plugin's cmp-server, application controller,
// ApplicationSet controller) and our bridge in local mode, all on
// loopback.
type stack struct {
	procs
	dir        string // scratch: data directories, sockets, the git repository
	bin        map[string]string
	kube       *kube
	argocd     string // argocd-server host:port
	argoJWT    string
	bridge     *proc
	bridgeAddr string // the bridge as everything else reaches it: the balancer
	bridgePort string // where the (first) bridge replica listens
	lb         *balancer
	bridgeEnv  []string // the export lines of the bridge: what the CLI needs
	ageKeys    string
	logf       func(string, ...any)
	// metrics is each Argo CD process's metrics address, where its
	// profiler answers (profile.go).
	metrics map[string]string
}

// stackLevers are the levers the stack runs with (levers.go); benchMode
// (make bench-argocd) runs Argo CD's controller at its default
// reconciliation period instead of the scenarios' 60 s.
var (
	stackLevers levers
	benchMode   bool
)

// repoRoot is the bucketops repository (integration/..).
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd)
}

func startStack(bins map[string]string, ageKeyFile string, logDir string, logf func(string, ...any)) (s *stack, err error) {
	dir, err := os.MkdirTemp("", "bucketops-e2e-")
	if err != nil {
		return nil, err
	}
	s = &stack{procs: procs{logs: logDir}, dir: dir, bin: bins, ageKeys: ageKeyFile, logf: logf, metrics: map[string]string{}}
	// A failed start stops what it started; the return has set s to nil.
	started := s
	defer func() {
		if err != nil {
			started.stop()
		}
	}()
	steps := []struct {
		name string
		f    func() error
	}{
		{"our binaries", s.buildOurs},
		{"etcd", s.startEtcd},
		{"kube-apiserver", s.startAPIServer},
		{"kube-controller-manager", s.startControllerManager},
		{"Argo CD settings", s.setupArgoCD},
		{"Argo CD profiler", s.enableProfiler},
		{"redis", s.startRedis},
		// Each process starts after those it calls, so the addresses it
		// is given are of processes already listening, and a start that
		// must take fresh ports affects no other.
		{"argocd-repo-server", s.startRepoServer},
		{"argocd-server", s.startArgoServer},
		{"bucketops-bridge", s.startBridge},
		{"git view credentials", s.gitViewCredentials},
		{"argocd-cmp-server", s.startCMPServer},
		{"argocd-application-controller", s.startController},
		{"ApplicationSet generator settings", s.generatorSettings},
		{"argocd-applicationset-controller", s.startAppSetController},
	}
	for _, st := range steps {
		start := time.Now()
		if err := st.f(); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		logf("%s up in %s", st.name, time.Since(start).Round(10*time.Millisecond))
	}
	return s, nil
}

func (s *stack) stop() {
	s.stopAll()
	if s.lb != nil {
		s.lb.close()
	}
	os.RemoveAll(s.dir)
}

func (s *stack) path(parts ...string) string {
	return filepath.Join(append([]string{s.dir}, parts...)...)
}

func (s *stack) buildOurs() error {
	out := s.path("bin")
	cmd := exec.Command("go", "build", "-o", out+"/", "github.com/bucketops/bucketops/cmd/bucketops", "github.com/bucketops/bucketops/cmd/bucketops-bridge")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	s.bin["bucketops"] = filepath.Join(out, "bucketops")
	s.bin["bucketops-bridge"] = filepath.Join(out, "bucketops-bridge")
	return nil
}

var etcdURL string

func (s *stack) startEtcd() error {
	attempt := 0
	_, ports, err := s.startOnPorts("etcd", 3, func(ports []int) (*proc, error) {
		// A data directory per attempt: etcd records its peer URL there.
		attempt++
		client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return s.start("etcd", s.bin["etcd"], []string{
			"--name", "default", "--data-dir", s.path(fmt.Sprintf("etcd-%d", attempt)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "default=" + peer,
			"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
			"--unsafe-no-fsync", "--log-level", "warn",
		}, os.Environ(), s.dir)
	}, func(p *proc, ports []int) error {
		return waitFor("etcd", p, 30*time.Second, func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/health", ports[0]), "") })
	})
	if err != nil {
		return err
	}
	etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	return nil
}

func (s *stack) startAPIServer() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	os.MkdirAll(s.path("kube"), 0o700)
	os.WriteFile(s.path("kube", "sa.key"), keyPEM, 0o600)
	os.WriteFile(s.path("kube", "sa.pub"), pubPEM, 0o600)
	token := hex.EncodeToString(randBytes(24))
	os.WriteFile(s.path("kube", "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600)
	_, ports, err := s.startOnPorts("kube-apiserver", 1, func(ports []int) (*proc, error) {
		return s.start("kube-apiserver", s.bin["kube-apiserver"], []string{
			"--etcd-servers", etcdURL,
			"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[0]),
			"--cert-dir", s.path("kube", "certs"), "--token-auth-file", s.path("kube", "tokens.csv"),
			"--anonymous-auth=false", "--authorization-mode=RBAC",
			"--service-account-issuer", "https://kubernetes.default.svc",
			"--service-account-key-file", s.path("kube", "sa.pub"),
			"--service-account-signing-key-file", s.path("kube", "sa.key"),
			"--service-cluster-ip-range", "10.96.0.0/24", "--endpoint-reconciler-type", "none",
		}, os.Environ(), s.dir)
	}, func(p *proc, ports []int) error {
		k := newKube(fmt.Sprintf("https://127.0.0.1:%d", ports[0]), token)
		return waitFor("kube-apiserver", p, 60*time.Second, func() error { return k.do(http.MethodGet, "/readyz", "", nil, nil) })
	})
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	s.kube = newKube(url, token)
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin, namespace: argocd}
current-context: e2e
`, url, token)
	return os.WriteFile(s.path("kube", "config"), []byte(kubeconfig), 0o600)
}

func (s *stack) startControllerManager() error {
	_, _, err := s.startOnPorts("kube-controller-manager", 1, func(ports []int) (*proc, error) {
		return s.start("kube-controller-manager", s.bin["kube-controller-manager"], []string{
			"--kubeconfig", s.path("kube", "config"),
			"--authentication-kubeconfig", s.path("kube", "config"),
			"--authorization-kubeconfig", s.path("kube", "config"),
			"--controllers", "garbagecollector,namespace", "--leader-elect=false",
			"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[0]),
		}, os.Environ(), s.dir)
	}, func(p *proc, ports []int) error {
		// /healthz is always allowed; it serves once the controllers run.
		k := newKube(fmt.Sprintf("https://127.0.0.1:%d", ports[0]), "")
		return waitFor("kube-controller-manager", p, 60*time.Second, func() error { return k.do(http.MethodGet, "/healthz", "", nil, nil) })
	})
	return err
}

// setupArgoCD applies Argo CD's CRDs from its module and the namespace and
// settings objects its processes expect.
func (s *stack) setupArgoCD() error {
	crds, err := argoCRDs()
	if err != nil {
		return err
	}
	for name, body := range crds {
		if err := s.kube.apply("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, body); err != nil {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
	}
	objects := []struct{ path, body string }{
		{"/api/v1/namespaces/argocd", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"argocd"}}`},
		{"/api/v1/namespaces/argocd/configmaps/argocd-cm", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"argocd-cm","namespace":"argocd","labels":{"app.kubernetes.io/part-of":"argocd"}},"data":{"timeout.reconciliation":"` + reconciliation() + `","admin.enabled":"true"}}`},
		{"/api/v1/namespaces/argocd/configmaps/argocd-rbac-cm", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"argocd-rbac-cm","namespace":"argocd","labels":{"app.kubernetes.io/part-of":"argocd"}}}`},
		{"/api/v1/namespaces/argocd/configmaps/argocd-cmd-params-cm", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"argocd-cmd-params-cm","namespace":"argocd","labels":{"app.kubernetes.io/part-of":"argocd"}}}`},
		{"/api/v1/namespaces/argocd/secrets/argocd-secret", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"argocd-secret","namespace":"argocd","labels":{"app.kubernetes.io/part-of":"argocd"}}}`},
	}
	for _, o := range objects {
		if err := s.kube.apply(o.path, []byte(o.body)); err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
	}
	// CRDs serve once established.
	return waitFor("Argo CD CRDs", nil, 30*time.Second, func() error {
		return s.kube.do(http.MethodGet, "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications", "", nil, nil)
	})
}

// argoCRDs reads manifests/crds from the Argo CD module.
func argoCRDs() (map[string][]byte, error) {
	mod, err := downloadModule(versions.argocdModule(), versions.argocd, versions.argocdGo)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for file, name := range map[string]string{
		"application-crd.yaml":    "applications.argoproj.io",
		"applicationset-crd.yaml": "applicationsets.argoproj.io",
		"appproject-crd.yaml":     "appprojects.argoproj.io",
	} {
		b, err := os.ReadFile(filepath.Join(mod.Dir, "manifests", "crds", file))
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// gitViewURL is the bridge's git view of app: the repoURL of every
// Application. No git repository exists anywhere in the stack.
func (s *stack) gitViewURL(app string) string {
	return "http://" + s.bridgeAddr + "/git/" + app + ".git"
}

// gitViewCredentials gives Argo CD the git view's credentials the way
// docs/argocd.md does: a repo-creds Secret for the bridge's /git/ prefix,
// the reader token as password.
func (s *stack) gitViewCredentials() error {
	token, err := os.ReadFile(s.path("bridge.token"))
	if err != nil {
		return err
	}
	secret, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "bucketops-git-view", "namespace": "argocd",
			"labels": map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}},
		"stringData": map[string]string{"type": "git", "url": "http://" + s.bridgeAddr + "/git/",
			"username": "bucketops", "password": strings.TrimSpace(string(token)),
			// Sent with every request, so git asks no askpass process after
			// a 401 (the basic-auth lever).
			"forceHttpBasicAuth": strconv.FormatBool(stackLevers.basicAuth)},
	})
	return s.kube.apply("/api/v1/namespaces/argocd/secrets/bucketops-git-view", secret)
}

var redisAddr string

func (s *stack) startRedis() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errors.New("redis-server is not installed: apt-get install -y redis-server (make e2e does)")
	}
	_, ports, err := s.startOnPorts("redis", 1, func(ports []int) (*proc, error) {
		return s.start("redis", bin, []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--save", "", "--appendonly", "no"}, os.Environ(), s.dir)
	}, func(p *proc, ports []int) error {
		return waitFor("redis", p, 20*time.Second, listening(fmt.Sprintf("127.0.0.1:%d", ports[0])))
	})
	if err != nil {
		return err
	}
	redisAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	return nil
}

var repoServerAddr string

// argoEnv is the environment of every Argo CD process.
func (s *stack) argoEnv(binaryName string, extra ...string) []string {
	os.MkdirAll(s.path("argocd", "tls"), 0o755)
	os.MkdirAll(s.path("argocd", "ssh"), 0o755)
	os.MkdirAll(s.path("argocd", "sock"), 0o755)
	os.MkdirAll(s.path("argocd", "tmp", binaryName), 0o755)
	env := append(os.Environ(),
		"ARGOCD_BINARY_NAME="+binaryName,
		"KUBECONFIG="+s.path("kube", "config"),
		"ARGOCD_FAKE_IN_CLUSTER=true",
		"ARGOCD_GPG_ENABLED=false",
		"ARGOCD_PLUGINSOCKFILEPATH="+s.path("argocd", "sock"),
		"ARGOCD_CMP_WORKDIR="+s.path("argocd", "tmp", binaryName),
		"ARGOCD_ASK_PASS_SOCK="+s.path("argocd", "sock", "askpass.sock"),
		"TMPDIR="+s.path("argocd", "tmp", binaryName),
		"ARGOCD_TLS_DATA_PATH="+s.path("argocd", "tls"),
		"ARGOCD_SSH_DATA_PATH="+s.path("argocd", "ssh"),
		"ARGOCD_CONTROLLER_REPLICAS=1",
	)
	return append(append(env, s.profilerEnv()...), extra...)
}

func (s *stack) startArgoServer() error {
	p, ports, err := s.startOnPorts("argocd-server", 2, func(ports []int) (*proc, error) {
		return s.start("argocd-server", s.bin["argocd"], []string{
			"--insecure", "--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--metrics-port", strconv.Itoa(ports[1]),
			"--repo-server", repoServerAddr, "--repo-server-plaintext", "--redis", redisAddr,
			"--dex-server", "http://127.0.0.1:1", "--namespace", "argocd",
		}, s.argoEnv("argocd-server"), s.dir)
	}, func(p *proc, ports []int) error {
		return waitFor("argocd-server", p, 60*time.Second, func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), "") })
	})
	if err != nil {
		return err
	}
	s.argocd = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.metrics["argocd-server"] = fmt.Sprintf("127.0.0.1:%d", ports[1])
	// Log in as admin with the generated password, as a user would.
	var password string
	err = waitFor("argocd-initial-admin-secret", p, 60*time.Second, func() error {
		d, err := s.kube.secretData("argocd", "argocd-initial-admin-secret")
		if err != nil || d["password"] == "" {
			return fmt.Errorf("not yet: %v", err)
		}
		password = d["password"]
		return nil
	})
	if err != nil {
		return err
	}
	return waitFor("argocd login", p, 30*time.Second, func() error {
		body, _ := json.Marshal(map[string]string{"username": "admin", "password": password})
		resp, err := http.Post("http://"+s.argocd+"/api/v1/session", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var out struct{ Token string }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
			return fmt.Errorf("login: %d %v", resp.StatusCode, err)
		}
		s.argoJWT = out.Token
		return os.WriteFile(s.path("argocd", "token"), []byte(out.Token), 0o600)
	})
}

// startBridge runs bucketops-bridge in local mode with Argo CD, syncing
// with prune, and keeps its export lines for the CLI and the plugin.
func (s *stack) startBridge() error { return s.runBridge("--poll-interval", "60s") }

func (s *stack) runBridge(extra ...string) error {
	// One address and one token across restarts: the cmp-server, Argo CD's
	// repository credentials and the Applications' repoURLs keep them. The
	// address is the balancer's, as it would be a Service's; the bridge
	// itself binds port 0 each time it starts and prints where it listens.
	if s.lb == nil {
		var err error
		if s.lb, err = newBalancer("127.0.0.1:0"); err != nil {
			return err
		}
		s.bridgeAddr = s.lb.ln.Addr().String()
		if err := os.WriteFile(s.path("bridge.token"), []byte(hex.EncodeToString(randBytes(32))+"\n"), 0o600); err != nil {
			return err
		}
	}
	args := append([]string{
		"--listen", "127.0.0.1:0", "--data", s.path("bucket"),
		"--token-file", "plugin=" + s.path("bridge.token"), "--token-file", "reader=" + s.path("bridge.token"),
		"--token-file", "generator=" + s.path("bridge.token"), "--kubeconfig", s.path("kube", "config"),
		"--argocd-server", s.argocd, "--argocd-plaintext", "--argocd-token-file", s.path("argocd", "token"),
		"--sync", "--sync-prune", "--age-key-file", s.ageKeys, "--log-level", "debug",
	}, append(stackLevers.bridgeArgs(reconciliation()), extra...)...)
	logPath := filepath.Join(s.logs, "bucketops-bridge.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin["bucketops-bridge"], args...)
	cmd.Stderr = f
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{name: "bucketops-bridge", cmd: cmd, log: logPath, done: make(chan struct{})}
	s.mu.Lock()
	s.list = append(s.list, p)
	s.mu.Unlock()
	var env []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			env = append(env, kv)
		}
		if strings.HasPrefix(line, "# bridge: ") {
			break
		}
	}
	go func() {
		io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	if len(env) < 4 {
		return fmt.Errorf("the bridge printed no environment; see %s", logPath)
	}
	listen := ""
	for i, kv := range env {
		if u, ok := strings.CutPrefix(kv, "BUCKETOPS_BRIDGE=http://"); ok {
			listen = u
			env[i] = "BUCKETOPS_BRIDGE=http://" + s.bridgeAddr
		}
	}
	if listen == "" {
		return fmt.Errorf("the bridge printed no BUCKETOPS_BRIDGE=http://…; see %s", logPath)
	}
	s.bridgePort = listen
	s.lb.set(s.bridgePort)
	s.bridge, s.bridgeEnv = p, env
	return nil
}

func (s *stack) env(key string) string {
	for _, kv := range s.bridgeEnv {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// startCMPServer runs argocd-cmp-server with our plugin.yaml and our
// bucketops on its PATH, as the repo-server sidecar does.
func (s *stack) startCMPServer() error {
	conf := s.path("cmp")
	os.MkdirAll(conf, 0o755)
	plugin, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "kubernetes", "base", "plugin.yaml"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(conf, "plugin.yaml"), plugin, 0o644); err != nil {
		return err
	}
	env := s.argoEnv("argocd-cmp-server",
		"PATH="+filepath.Dir(s.bin["bucketops"])+":"+os.Getenv("PATH"),
		"BUCKETOPS_BRIDGE="+s.env("BUCKETOPS_BRIDGE"),
		"BUCKETOPS_TOKEN_FILE="+s.env("BUCKETOPS_TOKEN_FILE"),
	)
	p, err := s.start("argocd-cmp-server", s.bin["argocd"], []string{"--config-dir-path", conf}, env, s.dir)
	if err != nil {
		return err
	}
	return waitFor("argocd-cmp-server socket", p, 30*time.Second, func() error {
		_, err := os.Stat(s.path("argocd", "sock", "bucketops.sock"))
		return err
	})
}

func (s *stack) startRepoServer() error {
	// The directory of the argocd binary holds Argo CD's hack/ scripts
	// too (binaries.go), and both go on the PATH, as in Argo CD's image:
	// git asks the askpass helper, the multi-call binary named argocd, for
	// the git view's credentials, and Argo CD 3.6 runs
	// git-verify-wrapper.sh on every repository operation.
	path := "PATH=" + filepath.Dir(s.bin["argocd"]) + ":" + os.Getenv("PATH")
	_, ports, err := s.startOnPorts("argocd-repo-server", 2, func(ports []int) (*proc, error) {
		args := []string{
			"--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--metrics-port", strconv.Itoa(ports[1]),
			"--disable-tls", "--redis", redisAddr,
			// Debug logs name each fresh manifest generation on v2.14,
			// which the fleet race counts (the repo-server has no metric
			// for it); 3.x logs it at info.
			"--loglevel", "debug",
		}
		env := s.argoEnv("argocd-repo-server", path)
		if stackLevers.tarExclude {
			// The plugin reads release.json only (the tar-exclude lever).
			env = append(env, "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=.git")
		}
		return s.start("argocd-repo-server", s.bin["argocd"], append(args, versions.repoServerArgs...), env, s.dir)
	}, func(p *proc, ports []int) error {
		return waitFor("argocd-repo-server", p, 60*time.Second, listening(fmt.Sprintf("127.0.0.1:%d", ports[0])))
	})
	if err != nil {
		return err
	}
	repoServerAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.metrics["argocd-repo-server"] = fmt.Sprintf("127.0.0.1:%d", ports[1])
	return nil
}

func (s *stack) startController() error {
	_, ports, err := s.startOnPorts("argocd-application-controller", 1, func(ports []int) (*proc, error) {
		return s.start("argocd-application-controller", s.bin["argocd"], s.controllerArgs(ports[0]), s.argoEnv("argocd-application-controller"), s.dir)
	}, func(p *proc, ports []int) error {
		// Its metrics listener (on 0.0.0.0) serves once it runs.
		return waitFor("argocd-application-controller", p, 60*time.Second, func() error { return listensOn(p.cmd.Process.Pid, ports) })
	})
	if err != nil {
		return err
	}
	s.metrics["argocd-application-controller"] = fmt.Sprintf("127.0.0.1:%d", ports[0])
	return nil
}

func (s *stack) controllerArgs(metrics int) []string {
	return []string{
		"--repo-server", repoServerAddr, "--repo-server-plaintext", "--redis", redisAddr,
		"--metrics-port", strconv.Itoa(metrics), "--namespace", "argocd",
		// Argo CD's own polling of main in the git view: every 60 s
		// rather than 180, so the scenarios that rely on it (a lost
		// notification) finish within their waits. A reconciliation with
		// no new release generates nothing (the repo-server caches the
		// plugin's manifests per commit), which a scenario counts. An
		// unstarted sync (argo-cd#18500) is the bridge's nudge's to fix.
		"--app-resync", strings.TrimSuffix(reconciliation(), "s"),
	}
}

// reconciliation is how often Argo CD compares every Application with its
// source: the scenarios' 60 s, or, in the fleet race, Argo CD 3.x's
// default 120 s (plus its jitter of up to 60 s), which every feed pays
// alike.
func reconciliation() string {
	if benchMode {
		return "120s"
	}
	return "60s"
}

// generatorSettings gives the ApplicationSet controller the bridge's
// generator as the base kustomization does: the ConfigMap
// bucketops-generator, its token a key of the Secret
// bucketops-bridge-tokens.
func (s *stack) generatorSettings() error {
	token, err := os.ReadFile(s.path("bridge.token"))
	if err != nil {
		return err
	}
	secret, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "bucketops-bridge-tokens", "namespace": "argocd"},
		"stringData": map[string]string{"generator": strings.TrimSpace(string(token))},
	})
	if err := s.kube.apply("/api/v1/namespaces/argocd/secrets/bucketops-bridge-tokens", secret); err != nil {
		return err
	}
	cm, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "bucketops-generator", "namespace": "argocd"},
		"data":     map[string]string{"baseUrl": "http://" + s.bridgeAddr, "token": "$bucketops-bridge-tokens:generator"},
	})
	return s.kube.apply("/api/v1/namespaces/argocd/configmaps/bucketops-generator", cm)
}

// startAppSetController runs argocd-applicationset-controller, Argo CD's
// multi-call binary under that name.
func (s *stack) startAppSetController() error {
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	_, ports, err := s.startOnPorts("argocd-applicationset-controller", 3, func(ports []int) (*proc, error) {
		return s.start("argocd-applicationset-controller", s.bin["argocd"], []string{
			"--namespace", "argocd", "--argocd-repo-server", repoServerAddr, "--repo-server-plaintext",
			"--metrics-addr", addr(ports[0]), "--probe-addr", addr(ports[1]), "--webhook-addr", addr(ports[2]),
			"--enable-leader-election=false", "--loglevel", "debug",
		}, s.argoEnv("argocd-applicationset-controller"), s.dir)
	}, func(p *proc, ports []int) error {
		// It registers no health checks; its metrics answer once its manager runs.
		return waitFor("argocd-applicationset-controller", p, 60*time.Second, func() error { return httpOK("http://"+addr(ports[0])+"/metrics", "") })
	})
	if err != nil {
		return err
	}
	s.metrics["argocd-applicationset-controller"] = addr(ports[0])
	return nil
}

// bucketops runs the CLI with the bridge's environment.
func (s *stack) bucketops(stdin string, args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(s.bin["bucketops"], args...)
	cmd.Env = append(os.Environ(), s.bridgeEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return out.String(), errb.String(), code
}

func httpOK(url, token string) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return nil
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// restartBridge stops the bridge and starts it again with extra flags, on
// the same address, data directory and tokens.
func (s *stack) restartBridge(extra ...string) error {
	s.bridge.stop(10 * time.Second)
	return s.runBridge(extra...)
}

// tamper overwrites app's head behind bucketops' back: new bytes, the old
// metadata, so the digest no longer matches.
func tamper(s *stack, app, content string) error {
	ctx := context.Background()
	client, err := storage.NewClient(ctx, option.WithEndpoint("http://"+s.env("STORAGE_EMULATOR_HOST")+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		return err
	}
	defer client.Close()
	bucket := strings.TrimPrefix(s.env("BUCKETOPS_BUCKET"), "gs://")
	obj := client.Bucket(bucket).Object(app + "/manifests.yaml")
	attrs, err := obj.Attrs(ctx)
	if err != nil {
		return err
	}
	w := obj.NewWriter(ctx)
	w.Metadata = attrs.Metadata
	w.ContentType = attrs.ContentType
	if _, err := io.WriteString(w, content); err != nil {
		return err
	}
	return w.Close()
}

// startReplica runs a second bridge replica in production mode against the
// first one's bucket (the emulator local mode embeds), on the stack's
// tokens and Argo CD, polling every 2 s. The balancer doesn't know it yet.
func (s *stack) startReplica(name string) (*proc, string, error) {
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	p, ports, err := s.startOnPorts(name, 1, func(ports []int) (*proc, error) {
		return s.start(name, s.bin["bucketops-bridge"], append([]string{
			"--listen", addr(ports[0]), "--bucket", s.env("BUCKETOPS_BUCKET"),
			"--token-file", "plugin=" + s.path("bridge.token"), "--token-file", "reader=" + s.path("bridge.token"),
			"--argocd-server", s.argocd, "--argocd-plaintext", "--argocd-token-file", s.path("argocd", "token"),
			"--sync", "--sync-prune", "--age-key-file", s.ageKeys, "--poll-interval", "2s", "--log-level", "debug",
		}, stackLevers.bridgeArgs(reconciliation())...), append(os.Environ(), "STORAGE_EMULATOR_HOST="+s.env("STORAGE_EMULATOR_HOST")), s.dir)
	}, func(p *proc, ports []int) error {
		return waitFor(name, p, 30*time.Second, func() error { return httpOK("http://"+addr(ports[0])+"/readyz", "") })
	})
	if err != nil {
		return nil, "", err
	}
	return p, addr(ports[0]), nil
}

// argoREST calls argocd-server's REST API as admin.
func (s *stack) argoREST(method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+s.argocd+path, r)
	req.Header.Set("Authorization", "Bearer "+s.argoJWT)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
