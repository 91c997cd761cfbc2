//go:build images

package image_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/image"
)

// docker runs the docker CLI and returns its trimmed stdout.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "docker", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImagesInDocker builds both images with make images, under a version
// of its own, loads them into this machine's Docker engine and runs them
// as a platform team would: the versions they print, the user they run as,
// their labels, and the bridge's HEALTHCHECK both healthy and unhealthy.
// It removes the containers and images it made.
func TestImagesInDocker(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("the docker CLI is needed: %v", err)
	}
	if _, err := docker(t, "info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Fatalf("no Docker engine answers: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	version := fmt.Sprintf("v0.0.0-images-test.%d", time.Now().UnixNano())
	revision := mustGit(t, root, "rev-parse", "HEAD")
	refs := map[string]string{}
	for _, r := range image.Recipes {
		refs[r.Name] = image.Ref(image.Repository, r.Name, version)
	}
	t.Cleanup(func() {
		for _, ref := range refs {
			exec.Command("docker", "rmi", "-f", ref).Run()
		}
	})
	build := exec.CommandContext(t.Context(), "make", "-C", root, "images", "GO="+goBin, "BIN="+t.TempDir(), "VERSION="+version)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}

	t.Run("the CLI image prints its version", func(t *testing.T) {
		out := mustDocker(t, "run", "--rm", refs["bucketops"], "version")
		if !strings.HasPrefix(out, "bucketops "+version+" ") {
			t.Errorf("docker run %s version printed %q, want bucketops %s", refs["bucketops"], out, version)
		}
	})

	t.Run("the bridge image prints the same version", func(t *testing.T) {
		out := mustDocker(t, "run", "--rm", refs["bucketops-bridge"], "--version")
		if !strings.HasPrefix(out, "bucketops-bridge "+version+" ") {
			t.Errorf("docker run %s --version printed %q, want bucketops-bridge %s", refs["bucketops-bridge"], out, version)
		}
	})

	for _, r := range image.Recipes {
		t.Run(r.Name+" runs as nonroot with its labels", func(t *testing.T) {
			var cfg struct {
				User   string
				Labels map[string]string
			}
			if err := json.Unmarshal([]byte(mustDocker(t, "image", "inspect", "--format", "{{json .Config}}", refs[r.Name])), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", cfg.User)
			}
			for k, want := range map[string]string{
				"org.opencontainers.image.source":   image.Source,
				"org.opencontainers.image.revision": revision,
				"org.opencontainers.image.version":  version,
			} {
				if got := cfg.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
		})
	}

	// health starts the bridge image with args and waits for Docker to
	// call it healthy or unhealthy; the check runs every second.
	health := func(t *testing.T, args ...string) (string, string) {
		t.Helper()
		run := append([]string{"run", "-d", "--health-interval", "1s", "--health-retries", "2", "--health-start-period", "0s", refs["bucketops-bridge"]}, args...)
		id := mustDocker(t, run...)
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
		deadline := time.Now().Add(90 * time.Second)
		for {
			status := mustDocker(t, "inspect", "--format", "{{.State.Health.Status}}", id)
			if status == "healthy" || status == "unhealthy" || time.Now().After(deadline) {
				logs, _ := exec.Command("docker", "logs", "--tail", "20", id).CombinedOutput()
				return status, string(logs)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	t.Run("the bridge image is healthy when the bridge serves", func(t *testing.T) {
		// No --bucket: local mode, an embedded bucket, on the image's
		// BUCKETOPS_LISTEN.
		if status, logs := health(t); status != "healthy" {
			t.Errorf("health %q, want healthy; the bridge's last lines:\n%s", status, logs)
		}
	})

	t.Run("the bridge image is unhealthy when nothing answers where the check looks", func(t *testing.T) {
		// The server moved off the image's address, the check did not.
		if status, logs := health(t, "--listen", "127.0.0.1:9090"); status != "unhealthy" {
			t.Errorf("health %q, want unhealthy; the bridge's last lines:\n%s", status, logs)
		}
	})

	t.Run("the bridge process runs as 65532", func(t *testing.T) {
		id := mustDocker(t, "run", "-d", refs["bucketops-bridge"])
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
		// What the process runs as, not what the config says.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := docker(t, "top", id, "-o", "pid,uid,comm")
			if err == nil && strings.Contains(out, "bucketops-bridg") { // comm is cut at 15 characters
				for line := range strings.Lines(out) {
					if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "bucketops") && f[1] != "65532" {
						t.Errorf("the bridge runs as uid %s, want 65532:\n%s", f[1], out)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the bridge never showed in docker top: %v\n%s", err, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}
