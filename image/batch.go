package image

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Batch is every Recipe built for every platform from one set of binaries:
// what make images and make release run.
type Batch struct {
	// BinDir holds the binaries as BinDir/OS_ARCH/NAME.
	BinDir    string
	Platforms []v1.Platform
	CACerts   []byte
	// Repository is where the images are named, Repository/NAME:Version.
	Repository string
	Version    string
	Revision   string
	Created    time.Time
}

// ParsePlatforms reads "linux/amd64 linux/arm64" (spaces or commas).
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := v1.ParsePlatform(f)
		if err != nil {
			return nil, err
		}
		if p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("platform %q: want OS/ARCH", f)
		}
		ps = append(ps, *p)
	}
	if len(ps) == 0 {
		return nil, errors.New("no platforms")
	}
	return ps, nil
}

// binary is the path of name built for p.
func (b Batch) binary(name string, p v1.Platform) string {
	return filepath.Join(b.BinDir, p.OS+"_"+p.Architecture, name)
}

// Images builds each Recipe for each platform, keyed by reference; the
// images of one reference are in the order of Platforms.
func (b Batch) Images() (map[string][]v1.Image, error) {
	out := map[string][]v1.Image{}
	for _, r := range Recipes {
		ref := Ref(cmp.Or(b.Repository, Repository), r.Name, b.Version)
		for _, p := range b.Platforms {
			bin, err := os.ReadFile(b.binary(r.Name, p))
			if err != nil {
				return nil, fmt.Errorf("image %s for %s: %w", r.Name, p.String(), err)
			}
			img, err := r.Build(Inputs{
				Binary: bin, CACerts: b.CACerts, Platform: p,
				Version: b.Version, Revision: b.Revision, Created: b.Created,
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.String(), err)
			}
			out[ref] = append(out[ref], img)
		}
	}
	return out, nil
}

// WriteDocker writes the images of one platform as a docker save tarball.
func (b Batch) WriteDocker(path string) error {
	if len(b.Platforms) != 1 {
		return fmt.Errorf("docker load takes one platform per tag; %d given", len(b.Platforms))
	}
	imgs, err := b.Images()
	if err != nil {
		return err
	}
	refs := map[string]v1.Image{}
	for ref, is := range imgs {
		refs[ref] = is[0]
	}
	return WriteDocker(path, refs)
}

// WriteLayouts writes each image's multi-platform index as an OCI image
// layout in dir/NAME, tagged Version, and returns images.txt: every index's
// and manifest's digest (see Describe).
func (b Batch) WriteLayouts(dir string) ([]byte, error) {
	imgs, err := b.Images()
	if err != nil {
		return nil, err
	}
	var digests bytes.Buffer
	for _, r := range Recipes {
		ref := Ref(cmp.Or(b.Repository, Repository), r.Name, b.Version)
		idx, err := Index(imgs[ref]...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		if err := WriteLayout(filepath.Join(dir, r.Name), b.Version, idx); err != nil {
			return nil, err
		}
		if err := Describe(&digests, ref, idx); err != nil {
			return nil, err
		}
	}
	return digests.Bytes(), nil
}
