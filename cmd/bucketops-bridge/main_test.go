package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var binDir string

// TestMain builds the two real binaries once: local mode is tested as a user
// runs it, a bridge process and the CLI talking to it through the printed
// environment.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bucketops-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/bucketops/bucketops/cmd/bucketops", "github.com/bucketops/bucketops/cmd/bucketops-bridge")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if sourceDir != "" {
		os.RemoveAll(sourceDir)
	}
	os.Exit(code)
}

type bridgeProc struct {
	cmd    *exec.Cmd
	env    []string // the export lines, as KEY=VALUE
	url    string
	stderr *bytes.Buffer
	done   chan error
}

// startBridge starts bucketops-bridge and waits for its export lines.
func startBridge(t *testing.T, args ...string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "bucketops-bridge"), append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &bridgeProc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- cmd.Wait() }()
	t.Cleanup(func() {
		// Stopped by PID whatever happened in the test.
		cmd.Process.Kill()
		<-b.done
		b.done <- nil
		if t.Failed() {
			t.Logf("bridge stderr:\n%s", b.stderr)
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("bridge exited before printing its environment: %s", b.stderr)
			}
			if kv, ok := strings.CutPrefix(line, "export "); ok {
				b.env = append(b.env, kv)
			}
			if rest, ok := strings.CutPrefix(line, "# bridge: "); ok {
				b.url, _, _ = strings.Cut(rest, " ")
				go func() {
					for range lines {
					}
				}()
				return b
			}
		case <-timeout:
			t.Fatalf("no environment printed within 30s: %s", b.stderr)
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (b *bridgeProc) stop(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.done:
		if err != nil {
			t.Fatalf("bridge exited with %v after SIGTERM: %s", err, b.stderr)
		}
		b.done <- nil
	case <-time.After(20 * time.Second):
		t.Fatal("bridge did not stop within 20s of SIGTERM")
	}
}

func (b *bridgeProc) bucketops(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "bucketops"), args...)
	// Not into the job summary of the CI running these tests.
	cmd.Env = append(os.Environ(), append(b.env, "GITHUB_STEP_SUMMARY=")...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bucketops %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

type logEntry struct {
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
	Sequence   uint64 `json:"sequence"`
}

func (b *bridgeProc) log(t *testing.T, app string) []logEntry {
	t.Helper()
	var entries []logEntry
	if err := json.Unmarshal([]byte(b.bucketops(t, "", "log", app, "-o", "json")), &entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

func configMap(value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  value: \"" + value + "\"\n"
}

func TestLocalModeKeepsHistoryAcrossRestarts(t *testing.T) {
	data := t.TempDir()
	b := startBridge(t, "--data", data)
	if len(b.env) != 4 || !strings.HasPrefix(b.env[0], "BUCKETOPS_BUCKET=gs://") || !strings.HasPrefix(b.env[1], "STORAGE_EMULATOR_HOST=127.0.0.1:") ||
		!strings.HasPrefix(b.env[2], "BUCKETOPS_BRIDGE=http://127.0.0.1:") || !strings.HasPrefix(b.env[3], "BUCKETOPS_TOKEN_FILE=/") {
		t.Fatalf("printed environment: %q", b.env)
	}
	resp, err := http.Get(b.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("/healthz: %d %q", resp.StatusCode, body)
	}

	b.bucketops(t, configMap("1"), "push", "prod/payments", "-", "--sequence", "1")
	b.bucketops(t, configMap("2"), "push", "prod/payments", "-", "--sequence", "2")
	before := b.log(t, "prod/payments")
	if len(before) != 2 {
		t.Fatalf("history before restart: %+v", before)
	}
	b.stop(t)

	b = startBridge(t, "--data", data)
	after := b.log(t, "prod/payments")
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("history after restart:\n%+v\nwant:\n%+v", after, before)
	}
	if got := b.bucketops(t, "", "show", "prod/payments@"+fmt.Sprint(before[1].Generation), "--raw"); !strings.Contains(got, `value: "1"`) {
		t.Errorf("first release after restart: %q", got)
	}
	b.bucketops(t, configMap("3"), "push", "prod/payments", "-", "--sequence", "3")
	if third := b.log(t, "prod/payments"); len(third) != 3 || third[0].Generation <= before[0].Generation {
		t.Errorf("a publish after restart: %+v", third)
	}
	b.stop(t)
}

func TestLocalModeSeedsExamplesOnce(t *testing.T) {
	data := t.TempDir()
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, "--data", data, "--seed", examples)
	var apps []struct {
		App string `json:"app"`
	}
	if err := json.Unmarshal([]byte(b.bucketops(t, "", "ls", "-o", "json")), &apps); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(apps) != "[{dev/guestbook} {dev/payments} {prod/guestbook}]" {
		t.Errorf("seeded apps: %v", apps)
	}
	// A user's push to a seeded app survives a restart that seeds again.
	b.bucketops(t, configMap("mine"), "push", "dev/guestbook", "-", "--sequence", "7")
	b.stop(t)
	b = startBridge(t, "--data", data, "--seed", examples)
	h := b.log(t, "dev/guestbook")
	if len(h) != 2 || h[0].Sequence != 7 {
		t.Errorf("after seeding again dev/guestbook has %+v, want the user's push (sequence 7) on top of the seed", h)
	}
	if p := b.log(t, "prod/guestbook"); len(p) != 1 {
		t.Errorf("prod/guestbook has %d releases after seeding twice, want 1", len(p))
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "nonsense"},
		{"--bucket", "s3://x"},
		{"--bucket", "gs://b", "--data", "/tmp/x"},
		{"--log-level", "loud"},
		{"extra"},
		{"--subscription", "my-sub"},
		{"--subscription", "projects/p/subscriptions/s"}, // local mode has its own
		{"--poll-interval", "10ms"},
		{"--pubsub-audience", "https://x"},
		{"--argocd-server", "argocd:443"},
		{"--sync"},
		{"--argocd-server", "a:443", "--argocd-token-file", "/t", "--sync-prune"},
		{"--history-cache-bytes", "1000"},
	} {
		err := run(t.Context(), args, io.Discard, io.Discard)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// envOf returns the value of key in the printed environment.
func (b *bridgeProc) envOf(t *testing.T, key string) string {
	t.Helper()
	for _, kv := range b.env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	t.Fatalf("%s not in the printed environment %q", key, b.env)
	return ""
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// login logs in to the pages with the token and returns the session cookie.
func login(t *testing.T, bridge, token string) *http.Cookie {
	t.Helper()
	resp, err := noRedirects.PostForm(bridge+"/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Value != "" {
			return c
		}
	}
	t.Fatalf("login: %s, no session cookie", resp.Status)
	return nil
}

// pageStatus is the status of GET path with the cookie, redirects not
// followed.
func pageStatus(t *testing.T, bridge, path string, c *http.Cookie) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, bridge+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestRestartWithDataKeepsTheTerminalWorking is issue 27's "make run
// survives a restart": with --data, the token, the emulator's address and
// (asked for any free port) the bridge's address are the same after a
// restart, so a terminal that sourced the export lines, and a UI session
// made before, keep working.
func TestRestartWithDataKeepsTheTerminalWorking(t *testing.T) {
	data := t.TempDir()
	b := startBridge(t, "--data", data)
	tokenFile := b.envOf(t, "BUCKETOPS_TOKEN_FILE")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	first := append([]string(nil), b.env...)
	b.bucketops(t, configMap("1"), "push", "prod/payments", "-", "--sequence", "1")
	session := login(t, b.url, strings.TrimSpace(string(token)))
	if code, _ := pageStatus(t, b.url, "/ui/apps", session); code != http.StatusOK {
		t.Fatalf("the pages with a fresh session: %d", code)
	}
	b.stop(t)

	b = startBridge(t, "--data", data)
	if fmt.Sprint(b.env) != fmt.Sprint(first) {
		t.Errorf("export lines after a restart:\n%q\nwant the same as before:\n%q", b.env, first)
	}
	if again, err := os.ReadFile(tokenFile); err != nil || string(again) != string(token) {
		t.Errorf("the token file after a restart: %q (%v), want the same token", again, err)
	}
	// The old terminal's environment still publishes.
	b.env = first
	b.bucketops(t, configMap("2"), "push", "prod/payments", "-", "--sequence", "2")
	if code, loc := pageStatus(t, b.url, "/ui/apps", session); code != http.StatusOK {
		t.Errorf("the session made before the restart: %d (to %q), want the page", code, loc)
	}
}

// TestLocalModeWithoutDataForgetsItsToken: without --data nothing outlives
// the process, the token file included.
func TestLocalModeWithoutDataForgetsItsToken(t *testing.T) {
	b := startBridge(t)
	tokenFile := b.envOf(t, "BUCKETOPS_TOKEN_FILE")
	if _, err := os.Stat(tokenFile); err != nil {
		t.Fatal(err)
	}
	b.stop(t)
	if _, err := os.Stat(tokenFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token file %s after the bridge stopped: %v, want it gone", tokenFile, err)
	}
}

// TestSecondRunFailsAndKeepsTheEnvFile is a second make run in another
// terminal: it must fail, fast and non-zero, say to pick another LISTEN,
// and leave the env file the first terminal sources alone.
func TestSecondRunFailsAndKeepsTheEnvFile(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "local.env")
	b := startBridge(t, "--env-file", envFile)
	want, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(want), "export BUCKETOPS_BRIDGE="+b.url+"\n") {
		t.Fatalf("env file:\n%s\nwant the export lines of %s", want, b.url)
	}
	addr := strings.TrimPrefix(b.url, "http://")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, filepath.Join(binDir, "bucketops-bridge"), "--listen", addr, "--env-file", envFile, "--seed", "../../examples")
	var stdout, stderr bytes.Buffer
	second.Stdout, second.Stderr = &stdout, &stderr
	err = second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || ctx.Err() != nil {
		t.Fatalf("second bridge on %s: %v, want a non-zero exit at once; stderr:\n%s", addr, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "address already in use") || !strings.Contains(stderr.String(), "LISTEN=") {
		t.Errorf("second bridge's error:\n%s\nwant it to say the address is in use and how to pick another (LISTEN=)", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("second bridge printed export lines: %q", stdout.String())
	}
	if got, err := os.ReadFile(envFile); err != nil || string(got) != string(want) {
		t.Errorf("env file after the second run: %q (%v), want the first run's:\n%s", got, err, want)
	}
	// The first bridge is unharmed, and a browser pointed at it lands on
	// the pages.
	if code, loc := pageStatus(t, b.url, "/", nil); code != http.StatusFound || loc != "/ui/" {
		t.Errorf("GET /: %d to %q, want a redirect to /ui/", code, loc)
	}
}
