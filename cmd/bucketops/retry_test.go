package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// flakyGCS puts a proxy in front of the emulator that answers status to
// every request until heal is called, and points the CLI at it.
func flakyGCS(t *testing.T, status int) (heal func(), requests *atomic.Int64) {
	t.Helper()
	emu := startBucket(t)
	target, err := url.Parse(emu.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var healed atomic.Bool
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if !healed.Load() {
			http.Error(w, `{"error":{"code":`+http.StatusText(status)+`}}`, status)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	return func() { healed.Store(true) }, requests
}

// TestPushRetriesWhatHeals is the retry loop the CI recipes used to carry:
// GCS failing (503) for longer than an attempt's --timeout, then healing,
// is one push command that publishes.
func TestPushRetriesWhatHeals(t *testing.T) {
	heal, _ := flakyGCS(t, http.StatusServiceUnavailable)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	time.AfterFunc(1500*time.Millisecond, heal)
	r := bucketops(t, "", "push", "prod/payments", dir, "--sequence", "1", "--timeout", "1s", "--retries", "3", "--retry-delay", "1s")
	if r.code != 0 || !strings.Contains(r.stdout, "published prod/payments@") {
		t.Fatalf("push --retries 3 through a 1.5 s outage: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "attempt 1 of 4 failed") || !strings.Contains(r.stderr, "again in 1s") {
		t.Errorf("stderr doesn't say it retried: %s", r.stderr)
	}
	// Without --retries the same outage fails the push.
	heal2, _ := flakyGCS(t, http.StatusServiceUnavailable)
	defer heal2()
	if r := bucketops(t, "", "push", "prod/payments", dir, "--sequence", "2", "--timeout", "1s"); r.code != exitFailure || strings.Contains(r.stderr, "attempt") {
		t.Errorf("push without --retries through an outage: exit %d, %s", r.code, r.stderr)
	}
}

// TestPushDoesNotRetryWhatWontHeal: refused credentials (403) and invalid
// input fail at once, whatever --retries says.
func TestPushDoesNotRetryWhatWontHeal(t *testing.T) {
	_, requests := flakyGCS(t, http.StatusForbidden)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	r := bucketops(t, "", "push", "prod/payments", dir, "--retries", "3", "--retry-delay", "10s")
	if r.code != exitFailure || !strings.Contains(r.stderr, "access denied") || strings.Contains(r.stderr, "attempt") {
		t.Errorf("push --retries 3 with refused credentials: exit %d, %s; want exit 1 at once, no retry", r.code, r.stderr)
	}
	n := requests.Load()
	if r := bucketops(t, "", "push", "Prod", dir, "--retries", "3"); r.code != exitInvalid || strings.Contains(r.stderr, "attempt") {
		t.Errorf("an invalid app with --retries: exit %d, %s", r.code, r.stderr)
	}
	if requests.Load() != n {
		t.Errorf("an invalid app reached GCS")
	}
	if r := bucketops(t, "", "push", "prod/x", dir, "--retries", "-1"); r.code != exitInvalid {
		t.Errorf("--retries -1: exit %d, %s", r.code, r.stderr)
	}
}

// TestAClosedPortFailsAtOnceAndSaysWhere: with nothing listening where
// STORAGE_EMULATOR_HOST points, a command fails at once (not after its
// --timeout) and says where nothing answered and what to check.
func TestAClosedPortFailsAtOnceAndSaysWhere(t *testing.T) {
	startBucket(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	t.Setenv("STORAGE_EMULATOR_HOST", closed)
	r := bucketops(t, "", "ls", "--timeout", "1m", "-o", "json")
	if r.code != exitFailure || !strings.Contains(r.stderr, "nothing answers at the GCS emulator at "+closed+" (STORAGE_EMULATOR_HOST)") ||
		strings.Contains(r.stderr, "gave up after --timeout") || strings.Contains(r.stderr, "http://") {
		t.Errorf("ls against a closed port: exit %d, %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `"code":"failure"`) {
		t.Errorf("-o json: %q", r.stdout)
	}
}

// TestWaitingOnGCSSaysSo: while GCS keeps failing, the CLI says on stderr
// what it is waiting for, rather than nothing until its --timeout.
func TestWaitingOnGCSSaysSo(t *testing.T) {
	heal, _ := flakyGCS(t, http.StatusServiceUnavailable)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	time.AfterFunc(2*noticeAfter, heal)
	r := bucketops(t, "", "push", "prod/payments", dir, "--timeout", "1m")
	if r.code != 0 {
		t.Fatalf("push through an outage shorter than --timeout: exit %d, %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "bucketops: waiting for the GCS emulator at ") || !strings.Contains(r.stderr, "503") ||
		!strings.Contains(r.stderr, "retrying until --timeout 1m0s") {
		t.Errorf("stderr while GCS answered 503:\n%s", r.stderr)
	}
}
