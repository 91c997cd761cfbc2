package image_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/bucketops/bucketops/image"
)

var commitTime = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func inputs(arch, version string) image.Inputs {
	return image.Inputs{
		Binary:   []byte("\x7fELF not really, " + arch),
		CACerts:  []byte("-----BEGIN CERTIFICATE-----\n"),
		Platform: v1.Platform{OS: "linux", Architecture: arch},
		Version:  version,
		Revision: "283b30d0000000000000000000000000000000000",
		Created:  commitTime,
	}
}

func build(t *testing.T, r image.Recipe, in image.Inputs) v1.Image {
	t.Helper()
	img, err := r.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, img interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuildIsReproducible(t *testing.T) {
	for _, r := range image.Recipes {
		t.Run(r.Name, func(t *testing.T) {
			first := digest(t, build(t, r, inputs("amd64", "v0.1.0")))
			// Another time of day to build at changes nothing: nothing reads the clock.
			time.Sleep(1100 * time.Millisecond)
			if again := digest(t, build(t, r, inputs("amd64", "v0.1.0"))); again != first {
				t.Errorf("two builds of the same inputs: %s, then %s", first, again)
			}
			for what, in := range map[string]image.Inputs{
				"another version":  inputs("amd64", "v0.1.1"),
				"another platform": inputs("arm64", "v0.1.0"),
			} {
				if d := digest(t, build(t, r, in)); d == first {
					t.Errorf("%s gives the same digest %s", what, d)
				}
			}
			other := inputs("amd64", "v0.1.0")
			other.Created = commitTime.Add(time.Second)
			if d := digest(t, build(t, r, other)); d == first {
				t.Errorf("another commit time gives the same digest %s", d)
			}
		})
	}
}

func TestLayerFiles(t *testing.T) {
	in := inputs("amd64", "v0.1.0")
	img := build(t, image.Bridge, in)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type file struct {
		mode     fs.FileMode
		uid, gid int
		data     string
	}
	got := map[string]file{}
	var order []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(commitTime) {
			t.Errorf("%s: mtime %s, want the commit's %s", h.Name, h.ModTime.UTC(), commitTime)
		}
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner names %q:%q, want none (the host's users are no input)", h.Name, h.Uname, h.Gname)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = file{h.FileInfo().Mode(), h.Uid, h.Gid, string(data)}
		order = append(order, h.Name)
	}
	if !slices.IsSorted(order) {
		t.Errorf("entries aren't in lexical order: %q", order)
	}
	want := map[string]file{
		"etc/":                              {fs.ModeDir | 0o755, 0, 0, ""},
		"etc/ssl/":                          {fs.ModeDir | 0o755, 0, 0, ""},
		"etc/ssl/certs/":                    {fs.ModeDir | 0o755, 0, 0, ""},
		"etc/ssl/certs/ca-certificates.crt": {0o644, 0, 0, string(in.CACerts)},
		"home/":                             {fs.ModeDir | 0o755, 0, 0, ""},
		"home/nonroot/":                     {fs.ModeDir | 0o755, 65532, 65532, ""},
		"tmp/":                              {fs.ModeDir | fs.ModeSticky | 0o777, 0, 0, ""},
		"usr/":                              {fs.ModeDir | 0o755, 0, 0, ""},
		"usr/local/":                        {fs.ModeDir | 0o755, 0, 0, ""},
		"usr/local/bin/":                    {fs.ModeDir | 0o755, 0, 0, ""},
		"usr/local/bin/bucketops-bridge":    {0o755, 0, 0, string(in.Binary)},
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: missing", name)
		case g != w:
			t.Errorf("%s: mode %s owner %d:%d %d bytes, want mode %s owner %d:%d %d bytes", name, g.mode, g.uid, g.gid, len(g.data), w.mode, w.uid, w.gid, len(w.data))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: not expected in the image", name)
		}
	}
}

func TestConfig(t *testing.T) {
	in := inputs("arm64", "v0.2.0")
	tests := []struct {
		recipe      image.Recipe
		entrypoint  string
		healthcheck []string
	}{
		{image.CLI, "/usr/local/bin/bucketops", nil},
		{image.Bridge, "/usr/local/bin/bucketops-bridge", []string{"CMD", "/usr/local/bin/bucketops-bridge", "--health-check"}},
	}
	for _, tt := range tests {
		t.Run(tt.recipe.Name, func(t *testing.T) {
			cf, err := build(t, tt.recipe, in).ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if c.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", c.User)
			}
			if !slices.Equal(c.Entrypoint, []string{tt.entrypoint}) {
				t.Errorf("entrypoint %q, want [%s]", c.Entrypoint, tt.entrypoint)
			}
			if cf.OS != "linux" || cf.Architecture != "arm64" {
				t.Errorf("platform %s/%s, want linux/arm64", cf.OS, cf.Architecture)
			}
			if !cf.Created.Time.Equal(commitTime) {
				t.Errorf("created %s, want the commit's %s", cf.Created.Time, commitTime)
			}
			for _, e := range []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"} {
				if !slices.Contains(c.Env, e) {
					t.Errorf("env %q lacks %s", c.Env, e)
				}
			}
			wantLabels := map[string]string{
				"org.opencontainers.image.source":      "https://github.com/bucketops/bucketops",
				"org.opencontainers.image.revision":    in.Revision,
				"org.opencontainers.image.version":     "v0.2.0",
				"org.opencontainers.image.created":     "2026-12-01T09:30:00Z",
				"org.opencontainers.image.title":       tt.recipe.Name,
				"org.opencontainers.image.description": tt.recipe.Description,
			}
			for k, v := range wantLabels {
				if c.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
				}
			}
			if tt.recipe.Description == "" {
				t.Error("no description")
			}
			switch {
			case tt.healthcheck == nil && c.Healthcheck != nil:
				t.Errorf("healthcheck %+v, want none", c.Healthcheck)
			case tt.healthcheck != nil && (c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, tt.healthcheck)):
				t.Errorf("healthcheck %+v, want test %q", c.Healthcheck, tt.healthcheck)
			}
		})
	}
}

// The bridge and its health check read the one address the image sets, so
// they can't disagree about the port.
func TestBridgeListensWhereItsHealthCheckLooks(t *testing.T) {
	cf, err := build(t, image.Bridge, inputs("amd64", "v0.1.0")).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cf.Config.Env, "BUCKETOPS_LISTEN=0.0.0.0:8080") {
		t.Errorf("env %q lacks BUCKETOPS_LISTEN=0.0.0.0:8080", cf.Config.Env)
	}
	for _, arg := range append(slices.Clone(cf.Config.Cmd), cf.Config.Healthcheck.Test...) {
		if strings.HasPrefix(arg, "--listen") {
			t.Errorf("%q names the address a second time", arg)
		}
	}
	if _, ok := cf.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v lack 8080/tcp", cf.Config.ExposedPorts)
	}
}

func TestBuildRefusesMissingInputs(t *testing.T) {
	in := inputs("amd64", "v0.1.0")
	in.CACerts = nil
	in.Created = time.Time{}
	_, err := image.CLI.Build(in)
	if err == nil || !strings.Contains(err.Error(), "CA bundle") || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("err = %v, want both problems named", err)
	}
}

func TestLayoutIsReproducible(t *testing.T) {
	write := func(dir string) string {
		idx, err := image.Index(build(t, image.Bridge, inputs("amd64", "v0.1.0")), build(t, image.Bridge, inputs("arm64", "v0.1.0")))
		if err != nil {
			t.Fatal(err)
		}
		if err := image.WriteLayout(dir, "v0.1.0", idx); err != nil {
			t.Fatal(err)
		}
		return treeSum(t, dir)
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if sa, sb := write(a), write(b); sa != sb {
		t.Errorf("two layouts of the same images differ:\n%s\n%s", sa, sb)
	}

	// skopeo copy --all oci:DIR:v0.1.0 finds the index by that name.
	p, err := layout.FromPath(a)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.1.0" {
		t.Fatalf("index.json lists %+v, want one index named v0.1.0", m.Manifests)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	var desc bytes.Buffer
	if err := image.Describe(&desc, "ghcr.io/bucketops/bucketops-bridge:v0.1.0", idx); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(desc.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], " index") || !strings.HasSuffix(lines[1], " linux/amd64") || !strings.HasSuffix(lines[2], " linux/arm64") {
		t.Errorf("images.txt lines:\n%s\nwant the index, then linux/amd64 and linux/arm64", desc.String())
	}
	if !strings.Contains(lines[0], m.Manifests[0].Digest.String()) {
		t.Errorf("the index line %q lacks the layout's digest %s", lines[0], m.Manifests[0].Digest)
	}
}

func TestIndexRefusesAPlatformTwice(t *testing.T) {
	img := build(t, image.CLI, inputs("amd64", "v0.1.0"))
	if _, err := image.Index(img, img); err == nil {
		t.Error("an index with linux/amd64 twice was made")
	}
}

// treeSum is one line per file under dir: its path and content's SHA-256.
func treeSum(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel + " " + hex.EncodeToString(sum[:]) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
