// Package release owns the files of a bucketops release besides its images:
// the tar.gz archives of the binaries, SHA256SUMS, and the version pinned in
// the VERSION file and the Kubernetes manifests.
//
// The contract: the same inputs give the same bytes. An archive's entries
// are sorted, owned by 0:0 with no names, stamped with the time given (the
// commit's), and gzipped with no name or time in the header; so a release
// built twice from one commit has one SHA256SUMS.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// versionPattern is a release version: v, then semver.
var versionPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// CheckVersion says whether v can name a release (v1.2.3, v1.2.3-rc.1).
func CheckVersion(v string) error {
	if !versionPattern.MatchString(v) {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH, e.g. v0.1.0", v)
	}
	return nil
}

// File is one file of an archive.
type File struct {
	Name string // path in the archive
	Path string // where it is read from
	Mode int64
}

// WriteArchive writes files as a tar.gz at path, every entry stamped mtime.
func WriteArchive(path string, files []File, mtime time.Time) error {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return fmt.Errorf("archive %s: %w", path, err)
		}
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Name,
			Mode:     f.Mode,
			Size:     int64(len(data)),
			ModTime:  mtime.UTC().Truncate(time.Second),
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("archive %s: %w", path, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("archive %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// WriteChecksums writes dir/SHA256SUMS for the named files of dir, sorted,
// in the format sha256sum -c reads.
func WriteChecksums(dir string, names []string) error {
	names = slices.Sorted(slices.Values(names))
	var b strings.Builder
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("SHA256SUMS: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("SHA256SUMS: %s: %w", name, err)
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// Manifests are the Kubernetes manifests that name the images, relative to
// the repository's root. They name the tag directly (not through
// kustomize's images:), so that kubectl patch --patch-file of the sidecar
// pins it too.
var Manifests = []string{
	"deploy/kubernetes/base/deployment.yaml",
	"deploy/kubernetes/repo-server-sidecar/argocd-repo-server-patch.yaml",
}

// imageLine is an image: field naming one of our images, with its tag.
var imageLine = regexp.MustCompile(`(?m)^(\s*(?:-\s+)?image:\s*ghcr\.io/bucketops/bucketops(?:-bridge)?):[^\s@]+[ \t]*$`)

// Pin writes version to root/VERSION and as the tag of every image of
// ours in root's Manifests; it writes nothing if a manifest names none.
func Pin(root, version string) error {
	if err := CheckVersion(version); err != nil {
		return err
	}
	var errs []error
	pinned := map[string][]byte{filepath.Join(root, "VERSION"): []byte(version + "\n")}
	for _, m := range Manifests {
		p := filepath.Join(root, filepath.FromSlash(m))
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !imageLine.Match(data) {
			errs = append(errs, fmt.Errorf("%s names no ghcr.io/bucketops image", m))
			continue
		}
		pinned[p] = imageLine.ReplaceAll(data, []byte("${1}:"+version))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pin %s: %w", version, err)
	}
	for p, data := range pinned {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pin %s: %w", version, err)
	}
	return nil
}

// ReadVersion reads root/VERSION.
func ReadVersion(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(data))
	return v, CheckVersion(v)
}
