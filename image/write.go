package image

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Ref is the image reference of name at version in repository.
func Ref(repository, name, version string) string {
	return strings.TrimSuffix(repository, "/") + "/" + name + ":" + version
}

// Index is the multi-platform index of imgs, one entry per image in the
// order given, each described by its config's platform.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	if len(imgs) == 0 {
		return nil, errors.New("index: no images")
	}
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	seen := map[string]bool{}
	for _, img := range imgs {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		p := cfg.Platform()
		if p == nil || seen[p.String()] {
			return nil, fmt.Errorf("index: platform %v missing or given twice", p)
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(empty.Index, adds...), nil
}

// WriteLayout writes idx as an OCI image layout in dir, named tag (the
// org.opencontainers.image.ref.name annotation), so that
// skopeo copy --all oci:DIR:TAG finds it.
func WriteLayout(dir, tag string, idx v1.ImageIndex) error {
	// A layout written again would keep the old blobs: start afresh, but
	// remove only what is a layout.
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	} else if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		return fmt.Errorf("oci layout %s: the directory holds something else", dir)
	}
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{"org.opencontainers.image.ref.name": tag}},
	})
	if _, err := layout.Write(dir, top); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	return nil
}

// WriteDocker writes the images under their references as one tarball in
// the format of docker save, for docker load.
func WriteDocker(path string, refs map[string]v1.Image) error {
	tags := make(map[name.Tag]v1.Image, len(refs))
	for ref, img := range refs {
		tag, err := name.NewTag(ref, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("docker tarball: %w", err)
		}
		tags[tag] = img
	}
	if err := tarball.MultiWriteToFile(path, tags); err != nil {
		return fmt.Errorf("docker tarball %s: %w", path, err)
	}
	return nil
}

// Describe writes one line for idx and one per platform: the reference, the
// digest and what it names (index, or the platform), so that a pull by
// digest can be checked against the release.
func Describe(w io.Writer, ref string, idx v1.ImageIndex) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	lines := []string{fmt.Sprintf("%s %s index", ref, d)}
	for _, desc := range m.Manifests {
		lines = append(lines, fmt.Sprintf("%s %s %s", ref, desc.Digest, desc.Platform))
	}
	slices.Sort(lines[1:])
	_, err = io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}
