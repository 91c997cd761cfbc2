package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// maxCLIBytes is the CLI's size budget: it runs in every CI job, often
// downloaded fresh, and was 42.6 MB when it linked the bridge's sops key
// services and gRPC's DirectPath. It was 25 MB until the CLI's own code
// (signature status, doctor, commit references, completion) grew past it
// by 35 KB in issue 27, with no new module.
const maxCLIBytes = 26_000_000

// banned are what the CLI must not link, as import path prefixes, and why.
// It publishes: it reads the SOPS file format (package render), never
// decrypts (package secrets, the bridge's), and keeps no metrics.
var banned = []struct{ prefix, why string }{
	{"github.com/getsops/sops/v3/keyservice", "sops' key services, for decryption, which is package secrets' (the bridge's)"},
	{"github.com/getsops/sops/v3/kms", "sops' AWS KMS keys"},
	{"github.com/getsops/sops/v3/azkv", "sops' Azure Key Vault keys"},
	{"github.com/getsops/sops/v3/hcvault", "sops' Vault keys"},
	{"github.com/getsops/sops/v3/hckms", "sops' HuaweiCloud KMS keys"},
	{"github.com/getsops/sops/v3/gcpkms", "sops' GCP KMS keys"},
	{"github.com/getsops/sops/v3/pgp", "sops' PGP keys"},
	{"github.com/aws/", "an AWS client"},
	{"github.com/Azure/", "an Azure client"},
	{"github.com/hashicorp/vault", "the Vault client"},
	{"github.com/huaweicloud", "a HuaweiCloud client"},
	{"github.com/argoproj/", "the Argo CD client, which is the bridge's"},
	{"github.com/prometheus/", "the Prometheus client: metrics are the bridge's (policy/watch)"},
	{"google.golang.org/grpc/xds", "gRPC's xDS and DirectPath, dropped by the build tag disable_grpc_modules (the Makefile's GOFLAGS)"},
}

// bannedBy returns the entry of banned that path falls under.
func bannedBy(path string) (prefix, why string, ok bool) {
	for _, b := range banned {
		if path == b.prefix || strings.HasPrefix(path, strings.TrimSuffix(b.prefix, "/")+"/") {
			return b.prefix, b.why, true
		}
	}
	return "", "", false
}

// TestCLIStaysLean builds the CLI as it ships (make cli) and holds it to
// its size budget and to the dependencies it may link.
func TestCLIStaysLean(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is needed to build the CLI as it ships: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is needed to build the CLI: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	version := fmt.Sprintf("lean-test-%d", time.Now().UnixNano())
	build := exec.CommandContext(t.Context(), makeBin, "-C", root, "cli", "GO="+goBin, "BIN="+bin, "VERSION="+version)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make cli: %v\n%s", err, out)
	}
	exe := filepath.Join(bin, "bucketops")

	t.Run("the binary is under its size budget", func(t *testing.T) {
		fi, err := os.Stat(exe)
		if err != nil {
			t.Fatalf("make cli BIN=%s wrote no bucketops: %v", bin, err)
		}
		if fi.Size() >= maxCLIBytes {
			t.Errorf("the CLI is %d bytes (%.1f MB), over its budget of %d: a dependency grew or a new one came in; compare `go version -m` of this build with the last one, and see what imports it with go list -deps -tags disable_grpc_modules ./cmd/bucketops",
				fi.Size(), float64(fi.Size())/1e6, maxCLIBytes)
		}
	})

	t.Run("it prints the version it was built with", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), exe, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("bucketops version: %v\n%s", err, out)
		}
		if !strings.HasPrefix(string(out), "bucketops "+version+" ") {
			t.Errorf("bucketops version printed %q, want the version make cli was given, %s: the Makefile's LDFLAGS no longer set main.version", out, version)
		}
	})

	t.Run("the binary links no module it must not", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), goBin, "version", "-m", exe).Output()
		if err != nil {
			t.Fatalf("go version -m: %v", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || (f[0] != "dep" && f[0] != "=>") {
				continue
			}
			if _, why, ok := bannedBy(f[1]); ok {
				t.Errorf("the CLI links module %s: %s; find why with go mod why -m %s", f[1], why, f[1])
			}
		}
	})

	t.Run("no package it must not is imported", func(t *testing.T) {
		// The binary names modules only: a sops key service lives in the
		// sops module, which the CLI links for the file format.
		list := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-tags", "disable_grpc_modules",
			"-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./cmd/bucketops")
		list.Dir = root
		list.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := list.Output()
		if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		imports := map[string][]string{}
		var pkgs []string
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			imports[f[0]] = f[1:]
			pkgs = append(pkgs, f[0])
		}
		// One error per banned prefix, with the chain to its first package:
		// a client brings dozens.
		found := map[string][]string{}
		for _, p := range pkgs {
			if prefix, _, ok := bannedBy(p); ok {
				found[prefix] = append(found[prefix], p)
			}
		}
		for _, b := range banned {
			ps := found[b.prefix]
			if len(ps) == 0 {
				continue
			}
			chain := importChain(imports, "github.com/bucketops/bucketops/cmd/bucketops", ps[0])
			t.Errorf("the CLI imports %d packages of %s (%s), %s through %s", len(ps), b.prefix, b.why, ps[0], strings.Join(chain, " → "))
		}
	})
}

// importChain is a shortest chain of imports from one package to another.
func importChain(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{from, "…", to}
}
