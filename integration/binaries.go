//go:build e2e

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Versions of the stack, as in shared/ARGOCD-E2E.md.
const (
	argocdVersion = "v2.14.21"
	kubeVersion   = "v1.31.0"
	etcdVersion   = "v3.5.21"
)

// tool is one upstream binary built from the Go module proxy through a
// wrapper module: go install refuses modules with replace directives.
type tool struct {
	name    string
	version string
	// module is the upstream module; its replace block is copied.
	module string
	// packages are built, each into a binary named after its last element.
	packages []string
	ldflags  string
	// main is a main.go of the wrapper's own, for upstreams without a
	// main package to build (etcd).
	main string
	// rewriteStaging turns kubernetes' ./staging/src/k8s.io/X replaces
	// into k8s.io/X at the matching v0 version.
	rewriteStaging bool
}

var tools = []tool{
	{
		name: "argocd", version: argocdVersion, module: "github.com/argoproj/argo-cd/v2",
		packages: []string{"github.com/argoproj/argo-cd/v2/cmd"},
		ldflags:  "-X github.com/argoproj/argo-cd/v2/common.version=" + strings.TrimPrefix(argocdVersion, "v"),
	},
	{
		name: "kubernetes", version: kubeVersion, module: "k8s.io/kubernetes",
		packages:       []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager"},
		ldflags:        kubeLdflags(kubeVersion),
		rewriteStaging: true,
	},
	{
		name: "etcd", version: etcdVersion, module: "go.etcd.io/etcd/server/v3",
		main: "package main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n",
	},
}

func kubeLdflags(v string) string {
	minor := strings.Split(strings.TrimPrefix(v, "v"), ".")[1]
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=2024-08-13T00:00:00Z",
			pkg, v, pkg, pkg, minor, pkg, pkg)
	}
	return b.String()
}

// cacheDir is where built binaries are kept by version, outside the repo:
// $BUCKETOPS_E2E_CACHE, else the user cache directory.
func cacheDir() (string, error) {
	if d := os.Getenv("BUCKETOPS_E2E_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "bucketops-e2e"), nil
}

// binaries builds what isn't in the cache yet and returns the path of each
// binary by name (argocd, kube-apiserver, kube-controller-manager, etcd).
func binaries(logf func(string, ...any)) (map[string]string, error) {
	dir, err := cacheDir()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range tools {
		binDir := filepath.Join(dir, "bin", t.name+"-"+t.version)
		names := t.binaryNames()
		complete := true
		for _, n := range names {
			out[n] = filepath.Join(binDir, n)
			if _, err := os.Stat(out[n]); err != nil {
				complete = false
			}
		}
		if complete {
			continue
		}
		start := time.Now()
		logf("building %s %s from the Go module proxy into %s (a cold build takes minutes; cached afterwards)", t.name, t.version, binDir)
		if err := t.build(filepath.Join(dir, "src", t.name+"-"+t.version), binDir); err != nil {
			return nil, fmt.Errorf("build %s %s: %w", t.name, t.version, err)
		}
		logf("built %s %s in %s", t.name, t.version, time.Since(start).Round(time.Second))
	}
	return out, nil
}

func (t tool) binaryNames() []string {
	if t.main != "" {
		return []string{t.name}
	}
	var names []string
	for _, p := range t.packages {
		n := filepath.Base(p)
		if n == "cmd" {
			n = t.name
		}
		names = append(names, n)
	}
	return names
}

// build writes the wrapper module into src and builds into bin. The
// binaries appear in bin only once all are built.
func (t tool) build(src, bin string) error {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	goMod, err := t.wrapperGoMod(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), goMod, 0o644); err != nil {
		return err
	}
	code := t.main
	if code == "" {
		var b strings.Builder
		b.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
		for _, p := range t.packages {
			fmt.Fprintf(&b, "\t_ %q\n", p)
		}
		b.WriteString(")\n")
		code = b.String()
	}
	file := "tools.go"
	if t.main != "" {
		file = "main.go"
	}
	if err := os.WriteFile(filepath.Join(src, file), []byte(code), 0o644); err != nil {
		return err
	}
	if err := goCmd(src, "mod", "tidy"); err != nil {
		return err
	}
	tmp := bin + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	targets := t.packages
	if t.main != "" {
		targets = []string{"."}
	}
	for i, p := range targets {
		name := t.binaryNames()[i]
		if err := goCmd(src, "build", "-trimpath", "-ldflags", "-s -w "+t.ldflags, "-o", filepath.Join(tmp, name), p); err != nil {
			return err
		}
	}
	os.RemoveAll(bin)
	return os.Rename(tmp, bin)
}

// wrapperGoMod requires the upstream module and copies its replace block.
func (t tool) wrapperGoMod(src string) ([]byte, error) {
	mod, err := downloadModule(t.module, t.version)
	if err != nil {
		return nil, err
	}
	upstream, err := os.ReadFile(mod.GoMod)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "module bucketops.local/e2e/%s\n\ngo 1.26.0\n\nrequire %s %s\n\n", t.name, t.module, t.version)
	block := replaceBlock(string(upstream))
	if t.rewriteStaging {
		v0 := "v0." + strings.SplitN(strings.TrimPrefix(t.version, "v1."), ".", 2)[0] + "." + strings.SplitN(t.version, ".", 3)[2]
		block = stagingReplace.ReplaceAllString(block, "$1 => $1 "+v0)
	}
	// What still points into the upstream's own tree (etcd's ../api) can't
	// be replaced from outside it: the required versions stand.
	for _, l := range strings.Split(block, "\n") {
		if !localReplace.MatchString(l) {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes(), nil
}

var localReplace = regexp.MustCompile(`=>\s*\.\.?/`)

var stagingReplace = regexp.MustCompile(`(?m)^\s*(k8s\.io/[a-z0-9-]+)\s*=>\s*\./staging/src/k8s\.io/[a-z0-9-]+\s*$`)

// replaceBlock returns the replace directives of a go.mod, block or single.
func replaceBlock(gomod string) string {
	var b strings.Builder
	lines := strings.Split(gomod, "\n")
	in := false
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		switch {
		case in:
			b.WriteString(l + "\n")
			if trimmed == ")" {
				in = false
			}
		case strings.HasPrefix(trimmed, "replace ("):
			in = true
			b.WriteString(l + "\n")
		case strings.HasPrefix(trimmed, "replace "):
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// module is where the Go module cache holds module@version, downloaded
// through the proxy: its source tree and its go.mod.
type module struct{ Dir, GoMod string }

func downloadModule(path, version string) (module, error) {
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return module{}, fmt.Errorf("go mod download %s@%s: %w\n%s", path, version, err, out)
	}
	var m module
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" || m.GoMod == "" {
		return module{}, fmt.Errorf("go mod download %s@%s: no Dir and GoMod in %s", path, version, out)
	}
	return m, nil
}

func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, lastLines(out, 30))
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
