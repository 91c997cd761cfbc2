//go:build faults

package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/googleapis/gax-go/v2"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/deploy/argocdtest"
	"github.com/bucketops/bucketops/store"
)

// label marks every container and network these tests create, with the
// test process's PID as its value, so a run killed before its cleanups (a
// -timeout panic) is swept by the next one: with Ryuk disabled nothing
// else would remove them. A run on the same engine that is still going is
// left alone.
const label = "io.bucketops.faults.pid"

var pid = strconv.Itoa(os.Getpid())

const (
	bucketName   = "releases"
	project      = "bucketops"
	topic        = "projects/" + project + "/topics/releases"
	subscription = "projects/" + project + "/subscriptions/bridge"
	gcsPort      = "4443"
	pubsubPort   = "8085"
	bridgePort   = "8080"
)

var (
	docker *testcontainers.DockerClient
	// images are the tags built by TestMain.
	images struct{ bridge, gcs, pubsub string }
	// cli is the bucketops CLI built for the host, where CI writers run.
	cli string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// No Ryuk image can be pulled here; the tests clean up themselves.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ctx := context.Background()
	var err error
	docker, err = testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = docker.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: no reachable Docker engine (%v).\n"+
			"These tests run the bridge, GCS and Pub/Sub in containers and need one: start dockerd, or set DOCKER_HOST. They fail rather than skip.\n", err)
		return 1
	}
	defer docker.Close()
	sweep(ctx, false)
	defer sweep(ctx, true)
	work, err := os.MkdirTemp("", "bucketops-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(work)
	if err := buildImages(ctx, work); err != nil {
		fmt.Fprintln(os.Stderr, "faults: building the images:", err)
		return 1
	}
	return m.Run()
}

// sweep removes what runs that are gone left behind, and with own, this
// run's leftovers.
func sweep(ctx context.Context, own bool) {
	gone := func(owner string) bool {
		if owner == pid {
			return own
		}
		n, err := strconv.Atoi(owner)
		return err != nil || syscall.Kill(n, 0) == syscall.ESRCH
	}
	f := client.Filters{}.Add("label", label)
	if cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			if gone(c.Labels[label]) {
				docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
	if ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			if gone(n.Labels[label]) {
				docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
}

// buildImages builds the static binaries and one FROM scratch image for
// each container: nothing is pulled.
func buildImages(ctx context.Context, work string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(work, "bin")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin+"/",
		"./cmd/bucketops-bridge", "./cmd/bucketops", "./integration/faults/pubsub-emulator", "github.com/fsouza/fake-gcs-server")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	cli = filepath.Join(bin, "bucketops")
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	defer provider.Close()
	for _, img := range []struct {
		tag  *string
		name string
	}{
		{&images.bridge, "bucketops-bridge"},
		{&images.gcs, "fake-gcs-server"},
		{&images.pubsub, "pubsub-emulator"},
	} {
		dir := filepath.Join(work, img.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Link(filepath.Join(bin, img.name), filepath.Join(dir, img.name)); err != nil {
			return err
		}
		// A non-root user, as deploy/kubernetes runs the bridge.
		dockerfile := fmt.Sprintf("FROM scratch\nCOPY %[1]s /%[1]s\nUSER 65532:65532\nENTRYPOINT [\"/%[1]s\"]\n", img.name)
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return err
		}
		tag, err := provider.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
			Context: dir, Repo: "bucketops-faults/" + img.name, Tag: "test", KeepImage: true,
		}})
		if err != nil {
			return fmt.Errorf("image %s: %w", img.name, err)
		}
		*img.tag = tag
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the bucketops module")
	}
	return filepath.Dir(mod), nil
}

// cluster is one scenario's world: GCS and Pub/Sub emulators and bridge
// replicas in containers, a fake Argo CD in this process, and the host's
// store, which is where CI writers publish from.
type cluster struct {
	t *testing.T
	// data joins GCS, Pub/Sub and the bridges; front joins the bridges and
	// this host (their API, the fake Argo CD).
	data, front *testcontainers.DockerNetwork
	gcs, pubsub testcontainers.Container
	gcsAddr     string // IP:port on data, reached from the host
	bridges     []*bridge
	argo        *argocdtest.Server
	client      *storage.Client
	store       *store.Store
	files       map[string]string // path in a bridge: content
	opts        options
	token       string // the plugin and reader token
}

// options shape a cluster.
type options struct {
	replicas int
	// poll is the bridges' --poll-interval; 0 turns polling off.
	poll time.Duration
	// apps get one Argo CD Application each.
	apps []string
}

// bridge is one replica.
type bridge struct {
	name string
	c    testcontainers.Container
	url  string // http://IP:port on front
}

func newCluster(t *testing.T, o options) *cluster {
	t.Helper()
	ctx := t.Context()
	c := &cluster{t: t, opts: o}
	c.data = newNetwork(t, "data")
	c.front = newNetwork(t, "front")

	c.pubsub = c.start(testcontainers.ContainerRequest{
		Image:          images.pubsub,
		Cmd:            []string{"-listen", "0.0.0.0:" + pubsubPort, "-topic", topic, "-subscription", subscription},
		Networks:       []string{c.data.Name},
		NetworkAliases: map[string][]string{c.data.Name: {"pubsub"}},
		WaitingFor:     wait.ForLog("pubsub emulator listening").WithStartupTimeout(time.Minute),
	})
	c.gcs = c.start(testcontainers.ContainerRequest{
		Image: images.gcs,
		// The memory backend: the filesystem one has no object versioning.
		Cmd: []string{"-scheme", "http", "-host", "0.0.0.0", "-port", gcsPort, "-backend", "memory",
			"-public-host", "gcs:" + gcsPort, "-external-url", "http://gcs:" + gcsPort, "-log-level", "info"},
		Env:            map[string]string{"PUBSUB_EMULATOR_HOST": "pubsub:" + pubsubPort},
		Networks:       []string{c.data.Name},
		NetworkAliases: map[string][]string{c.data.Name: {"gcs"}},
		WaitingFor:     wait.ForLog("server started").WithStartupTimeout(time.Minute),
	})
	c.gcsAddr = c.ip(c.gcs, c.data) + ":" + gcsPort

	// The bucket as an operator sets it up: versioned, with a notification
	// config on the topic (gcloud storage buckets notifications create).
	var err error
	c.client, err = storage.NewClient(ctx, option.WithEndpoint("http://"+c.gcsAddr+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.client.Close() })
	if err := c.client.Bucket(bucketName).Create(ctx, project, &storage.BucketAttrs{VersioningEnabled: true}); err != nil {
		t.Fatalf("create the bucket: %v", err)
	}
	if _, err := c.client.Bucket(bucketName).AddNotification(ctx, &storage.Notification{
		TopicProjectID: project, TopicID: "releases",
		PayloadFormat: storage.JSONPayload, EventTypes: []string{storage.ObjectFinalizeEvent},
	}); err != nil {
		t.Fatalf("bucket notification: %v", err)
	}
	c.store = store.New(c.client, store.Location{Bucket: bucketName}, slog.New(slog.DiscardHandler),
		store.WithBackoff(gax.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2}))

	// The fake Argo CD listens on this host's address on front: the only
	// one of its addresses the bridges can reach.
	gw := c.gateway(c.front)
	c.argo = argocdtest.Listen(t, gw+":0")
	for _, app := range o.apps {
		c.argo.Put(argocdtest.PluginApp(applicationName(app), argocdtest.Namespace, app))
	}
	// A refresh makes Argo CD resolve main in the app's git view, its head,
	// so that is the generation each refresh deployed.
	c.argo.RecordGeneration(func(a *v1alpha1.Application) int64 {
		app, ok := deploy.AppOf(a)
		if !ok {
			return -1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		head, err := c.store.Head(ctx, app)
		if err != nil {
			return -1
		}
		return head.Generation
	})

	secret := make([]byte, 16)
	rand.Read(secret)
	c.token = hex.EncodeToString(secret)
	// Mode 0444 (below): the images run as 65532, and the files are
	// copied as root.
	c.files = map[string]string{"/etc/bucketops/plugin": c.token, "/etc/bucketops/reader": c.token, "/etc/bucketops/argocd": c.argo.Token()}
	for i := range o.replicas {
		c.bridges = append(c.bridges, c.startBridge(fmt.Sprintf("bridge-%d", i+1)))
	}
	return c
}

// applicationName is the Argo CD Application for a bucketops app.
func applicationName(app string) string { return strings.ReplaceAll(app, "/", "-") }

func newNetwork(t *testing.T, name string) *testcontainers.DockerNetwork {
	t.Helper()
	n, err := tcnetwork.New(t.Context(), tcnetwork.WithLabels(map[string]string{label: pid}))
	testcontainers.CleanupNetwork(t, n)
	if err != nil {
		t.Fatalf("network %s: %v", name, err)
	}
	return n
}

// start runs a container that is removed when the test ends; when the test
// failed, its log is kept in the test's output first.
func (c *cluster) start(req testcontainers.ContainerRequest) testcontainers.Container {
	c.t.Helper()
	req.Labels = map[string]string{label: pid}
	ctr, err := testcontainers.GenericContainer(c.t.Context(), testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	testcontainers.CleanupContainer(c.t, ctr)
	// Cleanups run last first: this one, before the container goes.
	c.t.Cleanup(func() {
		if ctr != nil && c.t.Failed() {
			c.t.Logf("log of %s (%s):\n%s", req.Image, strings.Join(req.Cmd, " "), tail(ctr, 60))
		}
	})
	if err != nil {
		c.t.Fatalf("start %s: %v", req.Image, err)
	}
	return ctr
}

// tail is the end of a container's log.
func tail(ctr testcontainers.Container, lines int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (c *cluster) startBridge(name string) *bridge {
	c.t.Helper()
	args := []string{
		"--listen", "0.0.0.0:" + bridgePort,
		"--bucket", "gs://" + bucketName,
		"--subscription", subscription,
		"--poll-interval", c.opts.poll.String(),
		"--token-file", "plugin=/etc/bucketops/plugin", "--token-file", "reader=/etc/bucketops/reader",
		"--argocd-server", c.argo.Addr(), "--argocd-plaintext", "--argocd-token-file", "/etc/bucketops/argocd",
		"--log-level", "debug",
	}
	b := &bridge{name: name}
	var files []testcontainers.ContainerFile
	for path, content := range c.files {
		files = append(files, testcontainers.ContainerFile{Reader: strings.NewReader(content + "\n"), ContainerFilePath: path, FileMode: 0o444})
	}
	b.c = c.start(testcontainers.ContainerRequest{
		Image: images.bridge,
		Cmd:   args,
		Env: map[string]string{
			"STORAGE_EMULATOR_HOST": "gcs:" + gcsPort,
			"PUBSUB_EMULATOR_HOST":  "pubsub:" + pubsubPort,
		},
		Files: files,
		// As deploy/kubernetes mounts an emptyDir there: Argo CD's client
		// may need a socket in /tmp.
		Tmpfs:          map[string]string{"/tmp": "size=1m,mode=1777"},
		Networks:       []string{c.front.Name, c.data.Name},
		NetworkAliases: map[string][]string{c.front.Name: {name}, c.data.Name: {name}},
		WaitingFor:     wait.ForLog("bridge listening").WithStartupTimeout(time.Minute),
	})
	c.locate(b)
	c.waitReady(b)
	return b
}

// locate finds the replica's address on front; it can change when the
// container is started again.
func (c *cluster) locate(b *bridge) {
	c.t.Helper()
	b.url = "http://" + c.ip(b.c, c.front) + ":" + bridgePort
}

// ip is the container's address on n.
func (c *cluster) ip(ctr testcontainers.Container, n *testcontainers.DockerNetwork) string {
	c.t.Helper()
	info, err := ctr.Inspect(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	ep, ok := info.NetworkSettings.Networks[n.Name]
	if !ok || !ep.IPAddress.IsValid() {
		var have []string
		for name, ep := range info.NetworkSettings.Networks {
			have = append(have, name+"="+ep.IPAddress.String())
		}
		c.t.Fatalf("container %s has no address on network %s (it has %s)", ctr.GetContainerID()[:12], n.Name, strings.Join(have, ", "))
	}
	return ep.IPAddress.String()
}

// gateway is this host's address on n.
func (c *cluster) gateway(n *testcontainers.DockerNetwork) string {
	c.t.Helper()
	info, err := docker.NetworkInspect(c.t.Context(), n.ID, client.NetworkInspectOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, cfg := range info.Network.IPAM.Config {
		if cfg.Gateway.IsValid() {
			return cfg.Gateway.String()
		}
	}
	c.t.Fatalf("network %s has no gateway", n.Name)
	return ""
}

// waitReady waits for the replica's /readyz to answer 200.
func (c *cluster) waitReady(b *bridge) {
	c.t.Helper()
	var last string
	if !eventually(30*time.Second, func() bool {
		code, body := c.get(b, "/readyz")
		last = fmt.Sprintf("%d %s", code, body)
		return code == http.StatusOK
	}) {
		c.t.Fatalf("%s never ready: last /readyz %s", b.name, last)
	}
}

// get does an authenticated GET on a replica's API; a transport error is
// status 0 with the error as the body.
func (c *cluster) get(b *bridge, path string) (int, string) {
	ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// kill is docker kill: SIGKILL, no shutdown.
func (c *cluster) kill(ctr testcontainers.Container) {
	c.t.Helper()
	if _, err := docker.ContainerKill(c.t.Context(), ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		c.t.Fatalf("docker kill: %v", err)
	}
}

// restartBridge starts a killed or stopped replica again.
func (c *cluster) restartBridge(b *bridge) {
	c.t.Helper()
	if err := b.c.Start(c.t.Context()); err != nil {
		c.t.Fatalf("start %s again: %v", b.name, err)
	}
	c.locate(b)
	c.waitReady(b)
}

func (c *cluster) pause(ctr testcontainers.Container) {
	c.t.Helper()
	if _, err := docker.ContainerPause(c.t.Context(), ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		c.t.Fatalf("docker pause: %v", err)
	}
}

func (c *cluster) unpause(ctr testcontainers.Container) {
	c.t.Helper()
	// With the test's context gone (a failure), still unpause, or the
	// container can't be removed.
	if _, err := docker.ContainerUnpause(context.WithoutCancel(c.t.Context()), ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		c.t.Fatalf("docker unpause: %v", err)
	}
}

// disconnect cuts the replica off the data network (GCS and Pub/Sub).
func (c *cluster) disconnect(b *bridge) {
	c.t.Helper()
	if _, err := docker.NetworkDisconnect(c.t.Context(), c.data.ID, client.NetworkDisconnectOptions{Container: b.c.GetContainerID(), Force: true}); err != nil {
		c.t.Fatalf("docker network disconnect: %v", err)
	}
}

func (c *cluster) reconnect(b *bridge) {
	c.t.Helper()
	if _, err := docker.NetworkConnect(c.t.Context(), c.data.ID, client.NetworkConnectOptions{
		Container: b.c.GetContainerID(), EndpointConfig: &network.EndpointSettings{Aliases: []string{b.name}},
	}); err != nil {
		c.t.Fatalf("docker network connect: %v", err)
	}
}

// metric is the sum of a counter or gauge's samples on a replica's
// /metrics whose labels contain every one of match (`source="pull"`).
func (c *cluster) metric(b *bridge, name string, match ...string) (float64, error) {
	code, body := c.get(b, "/metrics")
	if code != http.StatusOK {
		return 0, fmt.Errorf("%s /metrics: %d %s", b.name, code, body)
	}
	var sum float64
	found := false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, nil
	}
	return sum, nil
}

// cliRun is one run of the CLI; code is -1 when it couldn't start.
type cliRun struct {
	stdout, stderr string
	code           int
}

// runCLI runs the bucketops CLI on the host against the cluster's bucket.
// It may run in any goroutine.
func (c *cluster) runCLI(ctx context.Context, args ...string) cliRun {
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = append(os.Environ(), "STORAGE_EMULATOR_HOST="+c.gcsAddr, "BUCKETOPS_BUCKET=gs://"+bucketName, "BUCKETOPS_AUTHOR=ci@faults")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliRun{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.code, r.stderr = -1, fmt.Sprintf("run %s: %v", cli, err)
	}
	return r
}

// eventually polls cond every 100 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refreshes folds the fake Argo CD's refresh calls: per app, the
// generations refreshed; and how many refreshes repeated an (app,
// generation) already refreshed, and which replica (by address) made them.
type refreshes struct {
	byApp      map[string]map[int64]int
	duplicates int
	total      int
	byPeer     map[string]int
}

func (c *cluster) refreshes() refreshes {
	r := refreshes{byApp: map[string]map[int64]int{}, byPeer: map[string]int{}}
	for _, call := range c.argo.Refreshes() {
		m := r.byApp[call.Name]
		if m == nil {
			m = map[int64]int{}
			r.byApp[call.Name] = m
		}
		if m[call.Generation] > 0 {
			r.duplicates++
		}
		m[call.Generation]++
		r.total++
		host, _, _ := strings.Cut(call.Peer, ":")
		r.byPeer[host]++
	}
	return r
}

// unrefreshed lists the apps (app@generation) whose head isn't refreshed yet.
func (c *cluster) unrefreshed(heads map[string]int64) []string {
	r := c.refreshes()
	var missing []string
	for app, gen := range heads {
		if r.byApp[applicationName(app)][gen] == 0 {
			missing = append(missing, fmt.Sprintf("%s@%d", app, gen))
		}
	}
	return missing
}

// heads reads every app's head generation from the bucket.
func (c *cluster) heads(apps []string) map[string]int64 {
	c.t.Helper()
	out := map[string]int64{}
	for _, app := range apps {
		out[app] = c.head(app).Generation
	}
	return out
}

// head is app's head release.
func (c *cluster) head(app string) store.Release {
	c.t.Helper()
	h, err := c.store.Head(c.t.Context(), app)
	if err != nil {
		c.t.Fatalf("head of %s: %v", app, err)
	}
	return h
}
