//go:build e2e

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/version"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// stackVersions is one stack make e2e can run: an Argo CD release and the
// Kubernetes and etcd it is tested with.
type stackVersions struct {
	argocd, kube, etcd string
	// argocdGo is the Go toolchain Argo CD's module asks for (its go.mod's
	// go line is newer than the project's Go): GOTOOLCHAIN for building
	// Argo CD's binaries and reading its module, and for nothing else.
	// Empty: the project's own toolchain.
	argocdGo string
	// repoServerArgs are flags argocd-repo-server needs on this release.
	repoServerArgs []string
}

// stacks are the versions make e2e knows; the first is the default and
// ARGOCD_VERSION picks another. Argo CD 3.6 is tested on Kubernetes
// v1.34-v1.37 (docs/operator-manual/tested-kubernetes-versions.md in its
// module), and Kubernetes v1.37's kubeadm runs etcd v3.7; v2.14 keeps the
// Kubernetes and etcd it was first run with here.
var stacks = []stackVersions{
	{
		argocd: "v3.6.2", kube: "v1.37.2", etcd: "v3.7.4", argocdGo: "go1.27.3",
		// Since 3.5 --client-ca-path defaults to a path and is refused
		// with --disable-tls ("--client-ca-path cannot be used when
		// --disable-tls is enabled"); only an explicit empty value clears
		// it (argo-cd#29661).
		repoServerArgs: []string{"--client-ca-path="},
	},
	{argocd: "v2.14.21", kube: "v1.31.0", etcd: "v3.5.21"},
}

// versions is the stack this run uses (set by TestMain from ARGOCD_VERSION).
var versions = stacks[0]

// pickStack returns the stack for an ARGOCD_VERSION value ("" for the
// default).
func pickStack(argocd string) (stackVersions, error) {
	if argocd == "" {
		return stacks[0], nil
	}
	var known []string
	for _, s := range stacks {
		if s.argocd == argocd || s.argocd == "v"+argocd {
			return s, nil
		}
		known = append(known, s.argocd)
	}
	return stackVersions{}, fmt.Errorf("ARGOCD_VERSION=%s: make e2e knows Argo CD %s (add a row to stacks in integration/binaries.go for another)", argocd, strings.Join(known, ", "))
}

// argocdModule is the Go module of an Argo CD release: its major version
// is in the path (github.com/argoproj/argo-cd/v3).
func (v stackVersions) argocdModule() string {
	return "github.com/argoproj/argo-cd/" + strings.SplitN(v.argocd, ".", 2)[0]
}

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
	// toolchain is GOTOOLCHAIN for this tool's go commands; "" is local.
	toolchain string
	// scripts are files of the upstream module copied next to the
	// binaries, executable: Argo CD's image has its hack/ scripts on the
	// PATH, and its repo-server runs git-verify-wrapper.sh on every
	// repository operation (3.6).
	scripts []string
}

func tools(v stackVersions) []tool {
	argocd := v.argocdModule()
	return []tool{
		{
			name: "argocd", version: v.argocd, module: argocd,
			packages:  []string{argocd + "/cmd"},
			ldflags:   "-X " + argocd + "/common.version=" + strings.TrimPrefix(v.argocd, "v"),
			toolchain: v.argocdGo,
			scripts:   []string{"hack/git-verify-wrapper.sh", "hack/gpg-wrapper.sh"},
		},
		{
			name: "kubernetes", version: v.kube, module: "k8s.io/kubernetes",
			packages:       []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager"},
			ldflags:        kubeLdflags(v.kube),
			rewriteStaging: true,
		},
		{
			name: "etcd", version: v.etcd, module: "go.etcd.io/etcd/server/v3",
			main: "package main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n",
		},
	}
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
	for _, t := range tools(versions) {
		binDir := filepath.Join(dir, "bin", t.name+"-"+t.version)
		names := t.binaryNames()
		complete := true
		for _, n := range append(names, t.scriptNames()...) {
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

// scriptNames are the scripts' names in the binaries' directory.
func (t tool) scriptNames() []string {
	var names []string
	for _, s := range t.scripts {
		names = append(names, path.Base(s))
	}
	return names
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
	if err := t.goCmd(src, "mod", "tidy"); err != nil {
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
		if err := t.goCmd(src, "build", "-trimpath", "-ldflags", "-s -w "+t.ldflags, "-o", filepath.Join(tmp, name), p); err != nil {
			return err
		}
	}
	if err := t.copyScripts(tmp); err != nil {
		return err
	}
	os.RemoveAll(bin)
	return os.Rename(tmp, bin)
}

// copyScripts copies the tool's scripts from the upstream module (the
// module cache, read-only) into dir, executable.
func (t tool) copyScripts(dir string) error {
	if len(t.scripts) == 0 {
		return nil
	}
	mod, err := downloadModule(t.module, t.version, t.toolchain)
	if err != nil {
		return err
	}
	for _, s := range t.scripts {
		b, err := os.ReadFile(filepath.Join(mod.Dir, filepath.FromSlash(s)))
		if err != nil {
			return fmt.Errorf("%s of %s@%s: %w", s, t.module, t.version, err)
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(s)), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// wrapperGoMod requires the upstream module and copies its replace block.
func (t tool) wrapperGoMod(src string) ([]byte, error) {
	mod, err := downloadModule(t.module, t.version, t.toolchain)
	if err != nil {
		return nil, err
	}
	upstream, err := os.ReadFile(mod.GoMod)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "module bucketops.local/e2e/%s\n\ngo %s\n\nrequire %s %s\n\n", t.name, wrapperGo(string(upstream)), t.module, t.version)
	block := replaceBlock(string(upstream))
	if t.rewriteStaging {
		v0 := "v0." + strings.SplitN(strings.TrimPrefix(t.version, "v1."), ".", 2)[0] + "." + strings.SplitN(t.version, ".", 3)[2]
		block = stagingReplace.ReplaceAllString(block, "$1 => $1 "+v0)
	}
	// What still points into the upstream's own tree (etcd's ../api, Argo
	// CD 3.x's ./gitops-engine, absent from its module zip) can't be
	// replaced from outside it: the required versions stand, and go mod
	// tidy takes them from the proxy.
	for _, l := range strings.Split(block, "\n") {
		if !localReplace.MatchString(l) {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes(), nil
}

// wrapperGo is the wrapper's go line: the upstream's when it asks for a
// newer Go than the project's (Argo CD 3.6: 1.27.0), else the project's.
func wrapperGo(upstreamGoMod string) string {
	const ours = "1.26.0"
	m := goLine.FindStringSubmatch(upstreamGoMod)
	if m != nil && version.Compare("go"+m[1], "go"+ours) > 0 {
		return m[1]
	}
	return ours
}

var goLine = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)

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

// downloadModule downloads module@version; toolchain is GOTOOLCHAIN ("" for
// local): Go won't extract a module whose go line is newer than itself.
func downloadModule(modPath, version, toolchain string) (module, error) {
	cmd := exec.Command("go", "mod", "download", "-json", modPath+"@"+version)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+goToolchain(toolchain), "GOFLAGS=-mod=mod")
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return module{}, fmt.Errorf("go mod download %s@%s: %w\n%s", modPath, version, err, out)
	}
	var m module
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" || m.GoMod == "" {
		return module{}, fmt.Errorf("go mod download %s@%s: no Dir and GoMod in %s", modPath, version, out)
	}
	return m, nil
}

func goToolchain(t string) string {
	if t == "" {
		return "local"
	}
	return t
}

// goCmd runs go in the tool's wrapper module, with its toolchain. GOFLAGS
// is cleared: the project's build tags are not the upstream's.
func (t tool) goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+goToolchain(t.toolchain), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
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
