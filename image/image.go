// Package image builds the bucketops container images from static binaries,
// with no Dockerfile, no base image and no registry: each image is one layer
// holding the binary at /usr/local/bin/NAME, a CA bundle, /tmp and
// /home/nonroot, and a config that runs it as user 65532.
//
// The contract: the same inputs give the same image, byte for byte, digest
// included. Every file and the config's Created carry the time the caller
// gives (the commit's, SOURCE_DATE_EPOCH), entries are written in one order
// with fixed owners and modes, and nothing reads the clock, the host's users
// or the build directory. So two builds of one commit are one image, and a
// digest in images.txt can be checked by building again.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/bucketops/bucketops"
	// Repository is where the images are published.
	Repository = "ghcr.io/bucketops"
	// NonRoot is the user and group the images run as (distroless's nonroot).
	NonRoot = 65532
	// CACertsPath is where the CA bundle goes, Debian's path.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// BinDir holds the binary.
	BinDir = "/usr/local/bin"
	// Home is the home directory of NonRoot.
	Home = "/home/nonroot"
)

// Recipe is what differs between the images: the program and how it runs.
type Recipe struct {
	// Name is the binary's name, its path in BinDir, the image's name and
	// its title label.
	Name        string
	Description string
	// Cmd is the default arguments after the entrypoint (the binary).
	Cmd []string
	// Env is added to PATH, SSL_CERT_FILE and HOME.
	Env []string
	// Ports are exposed, as "8080/tcp".
	Ports []string
	// Healthcheck is the Docker HEALTHCHECK; its Test runs without a shell.
	Healthcheck *v1.HealthConfig
}

// BridgeListen is the bridge image's listen address, given once, as
// $BUCKETOPS_LISTEN, to both the server and its health check.
const BridgeListen = "0.0.0.0:8080"

var (
	// CLI is the bucketops command, also the Argo CD plugin sidecar's image.
	CLI = Recipe{
		Name:        "bucketops",
		Description: "bucketops: publish, promote and inspect releases of Kubernetes manifests in a versioned GCS bucket; the Argo CD plugin",
	}
	// Bridge is the server that serves releases to Argo CD.
	Bridge = Recipe{
		Name:        "bucketops-bridge",
		Description: "bucketops-bridge: serves releases from a versioned GCS bucket to Argo CD",
		Env:         []string{"BUCKETOPS_LISTEN=" + BridgeListen},
		Ports:       []string{"8080/tcp"},
		Healthcheck: &v1.HealthConfig{
			Test:     []string{"CMD", path.Join(BinDir, "bucketops-bridge"), "--health-check"},
			Interval: 30 * time.Second,
			Timeout:  5 * time.Second,
			Retries:  3,
		},
	}
	// Recipes are the images a release holds.
	Recipes = []Recipe{CLI, Bridge}
)

// Inputs are everything an image is made of besides its Recipe. Two builds
// with equal Inputs are one image.
type Inputs struct {
	// Binary is the static binary, built for Platform.
	Binary []byte
	// CACerts is the CA bundle (Debian's ca-certificates.crt).
	CACerts  []byte
	Platform v1.Platform
	Version  string
	// Revision is the commit the binary was built from.
	Revision string
	// Created is the commit's time, stamped on every file and the config.
	Created time.Time
}

// Validate joins every problem with the inputs.
func (in Inputs) Validate() error {
	var errs []error
	if len(in.Binary) == 0 {
		errs = append(errs, errors.New("no binary"))
	}
	if len(in.CACerts) == 0 {
		errs = append(errs, errors.New("no CA bundle"))
	}
	if in.Platform.OS != "linux" || in.Platform.Architecture == "" {
		errs = append(errs, fmt.Errorf("platform %q: want linux/ARCH", in.Platform.String()))
	}
	if in.Version == "" {
		errs = append(errs, errors.New("no version"))
	}
	if in.Revision == "" {
		errs = append(errs, errors.New("no revision"))
	}
	if in.Created.IsZero() {
		errs = append(errs, errors.New("no creation time (SOURCE_DATE_EPOCH)"))
	}
	return errors.Join(errs...)
}

// Build makes the image of r from in.
func (r Recipe) Build(in Inputs) (v1.Image, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("image %s: %w", r.Name, err)
	}
	created := in.Created.UTC().Truncate(time.Second)
	layerTar, err := r.layer(in, created)
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", r.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", r.Name, err)
	}
	binary := path.Join(BinDir, r.Name)
	cfg := &v1.ConfigFile{
		Architecture: in.Platform.Architecture,
		OS:           in.Platform.OS,
		Variant:      in.Platform.Variant,
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       strconv.Itoa(NonRoot) + ":" + strconv.Itoa(NonRoot),
			Entrypoint: []string{binary},
			Cmd:        r.Cmd,
			WorkingDir: Home,
			Env: append([]string{
				"PATH=" + BinDir + ":/usr/bin:/bin",
				"SSL_CERT_FILE=" + CACertsPath,
				"HOME=" + Home,
			}, r.Env...),
			Labels:      r.labels(in, created),
			Healthcheck: r.Healthcheck,
		},
	}
	if len(r.Ports) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range r.Ports {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, cfg)
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", r.Name, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "bucketops image.Build: " + binary + ", CA bundle, /tmp, " + Home,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.Name, err)
	}
	return img, nil
}

// Labels are the OCI annotations' keys the config's labels use.
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelVersion     = "org.opencontainers.image.version"
	LabelCreated     = "org.opencontainers.image.created"
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
)

func (r Recipe) labels(in Inputs, created time.Time) map[string]string {
	return map[string]string{
		LabelSource:      Source,
		LabelRevision:    in.Revision,
		LabelVersion:     in.Version,
		LabelCreated:     created.Format(time.RFC3339),
		LabelTitle:       r.Name,
		LabelDescription: r.Description,
	}
}

// layer is the image's one layer, uncompressed: parents before children,
// in lexical order, owned by root but for the home directory.
func (r Recipe) layer(in Inputs, mtime time.Time) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		uid  int
		data []byte // nil: a directory
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CACertsPath[1:], mode: 0o644, data: in.CACerts},
		{name: "home/", mode: 0o755},
		{name: Home[1:] + "/", mode: 0o755, uid: NonRoot},
		{name: "tmp/", mode: 0o777 | int64(tarSticky)},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: path.Join(BinDir, r.Name)[1:], mode: 0o755, data: in.Binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarSticky is the sticky bit as tar's mode field holds it (c_ISVTX).
const tarSticky = 0o1000
