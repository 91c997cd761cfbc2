package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionFlagPrintsTheBuildVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "bucketops-bridge "+version+" (go") {
		t.Errorf("--version printed %q, want bucketops-bridge %s (go...)", out.String(), version)
	}
}

func TestHealthCheckAsksTheBridgeAtListen(t *testing.T) {
	b := startBridge(t)
	addr := strings.TrimPrefix(b.url, "http://")
	check := func(env []string, args ...string) error {
		cmd := exec.Command(filepath.Join(binDir, "bucketops-bridge"), append([]string{"--health-check"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("bucketops-bridge --health-check %s: %s", strings.Join(args, " "), out)
		}
		return err
	}
	if err := check(nil, "--listen", addr); err != nil {
		t.Errorf("the running bridge at %s is unhealthy: %v", addr, err)
	}
	// The image gives the address once, in the environment, to both.
	if err := check([]string{"BUCKETOPS_LISTEN=" + addr}); err != nil {
		t.Errorf("BUCKETOPS_LISTEN=%s: unhealthy: %v", addr, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()
	if err := check(nil, "--listen", nobody); err == nil {
		t.Errorf("nothing listens on %s, yet the check passed", nobody)
	} else if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() == 0 {
		t.Errorf("check of %s: %v, want a non-zero exit", nobody, err)
	}
}

func TestHealthCheckRefusesPortZero(t *testing.T) {
	err := run(t.Context(), []string{"--health-check", "--listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	if _, ok := err.(usageError); !ok {
		t.Errorf("--health-check --listen 127.0.0.1:0: %v, want a usage error", err)
	}
}
