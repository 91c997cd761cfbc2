package release_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/release"
)

var commitTime = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.1.0": true, "v1.20.3": true, "v1.0.0-rc.1": true,
		"0.1.0": false, "v1.0": false, "latest": false, "v01.0.0": false, "": false, "v1.0.0 ": false,
	} {
		if err := release.CheckVersion(v); (err == nil) != ok {
			t.Errorf("CheckVersion(%q) = %v, want ok %v", v, err, ok)
		}
	}
}

func TestArchiveIsReproducible(t *testing.T) {
	src := t.TempDir()
	// Written in reverse order, with other times and modes: none of it shows.
	for i, name := range []string{"bucketops-bridge", "bucketops"} {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte("binary "+name), 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, time.Now(), time.Now().Add(time.Duration(i)*time.Hour))
	}
	files := []release.File{
		{Name: "bucketops-bridge", Path: filepath.Join(src, "bucketops-bridge"), Mode: 0o755},
		{Name: "bucketops", Path: filepath.Join(src, "bucketops"), Mode: 0o755},
	}
	out := t.TempDir()
	a, b := filepath.Join(out, "a.tar.gz"), filepath.Join(out, "b.tar.gz")
	if err := release.WriteArchive(a, files, commitTime); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := release.WriteArchive(b, files, commitTime); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Fatal("two archives of the same files differ")
	}

	gz, err := gzip.NewReader(bytes.NewReader(da))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header names %q at %s, want neither (gzip -n)", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d (%q:%q), want 0:0 and no names", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if !h.ModTime.Equal(commitTime) {
			t.Errorf("%s: mtime %s, want the commit's %s", h.Name, h.ModTime, commitTime)
		}
		if h.Mode != 0o755 {
			t.Errorf("%s: mode %o, want 755", h.Name, h.Mode)
		}
	}
	if strings.Join(names, " ") != "bucketops bucketops-bridge" {
		t.Errorf("entries %q, want sorted: bucketops bucketops-bridge", names)
	}
}

func TestChecksumsAreWhatSha256sumChecks(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"z.tar.gz": "zz", "images.txt": "ii", "a.tar.gz": "aa"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := release.WriteChecksums(dir, []string{"z.tar.gz", "images.txt", "a.tar.gz"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	want := sum("aa") + "  a.tar.gz\n" + sum("ii") + "  images.txt\n" + sum("zz") + "  z.tar.gz\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", got, want)
	}
}

// copyManifests copies the repository's real manifests under a new root.
func copyManifests(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, m := range release.Manifests {
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(m)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(m))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestPinRewritesOnlyTheImageTags(t *testing.T) {
	root := copyManifests(t)
	before := map[string]string{}
	for _, m := range release.Manifests {
		data, _ := os.ReadFile(filepath.Join(root, m))
		before[m] = string(data)
	}
	if err := release.Pin(root, "v9.8.7"); err != nil {
		t.Fatal(err)
	}
	if v, err := release.ReadVersion(root); err != nil || v != "v9.8.7" {
		t.Errorf("VERSION = %q, %v; want v9.8.7", v, err)
	}
	for _, m := range release.Manifests {
		data, _ := os.ReadFile(filepath.Join(root, m))
		old, now := strings.Split(before[m], "\n"), strings.Split(string(data), "\n")
		if len(old) != len(now) {
			t.Fatalf("%s: %d lines became %d", m, len(old), len(now))
		}
		pinned := 0
		for i := range old {
			if old[i] == now[i] {
				continue
			}
			if !strings.Contains(now[i], "image: ghcr.io/bucketops/") || !strings.HasSuffix(now[i], ":v9.8.7") {
				t.Errorf("%s:%d: %q became %q, want only image tags changed", m, i+1, old[i], now[i])
			}
			pinned++
		}
		if pinned == 0 && !strings.Contains(before[m], ":v9.8.7") {
			t.Errorf("%s: no image pinned", m)
		}
	}
	// Pinning again is a no-op.
	if err := release.Pin(root, "v9.8.7"); err != nil {
		t.Fatal(err)
	}
}

func TestPinRefuses(t *testing.T) {
	t.Run("a version that isn't a release", func(t *testing.T) {
		root := copyManifests(t)
		if err := release.Pin(root, "latest"); err == nil {
			t.Error("pinned latest")
		}
		if _, err := os.Stat(filepath.Join(root, "VERSION")); err == nil {
			t.Error("VERSION written for a refused version")
		}
	})
	t.Run("a manifest that names none of our images", func(t *testing.T) {
		root := copyManifests(t)
		p := filepath.Join(root, release.Manifests[0])
		if err := os.WriteFile(p, []byte("image: example.com/other:v1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := release.Pin(root, "v1.0.0"); err == nil || !strings.Contains(err.Error(), release.Manifests[0]) {
			t.Errorf("err = %v, want the manifest named", err)
		}
		if _, err := os.Stat(filepath.Join(root, "VERSION")); err == nil {
			t.Error("VERSION written though a manifest couldn't be pinned")
		}
	})
}

// TestImagesArePinnedToTheRelease holds the repository's manifests to the
// VERSION file: a platform team applying deploy/kubernetes gets the images
// of the release it checked out, never :latest.
func TestImagesArePinnedToTheRelease(t *testing.T) {
	root := filepath.Join("..")
	version, err := release.ReadVersion(root)
	if err != nil {
		t.Fatalf("VERSION: %v (make release VERSION=vX.Y.Z writes it)", err)
	}
	for _, m := range release.Manifests {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m)))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for line := range strings.Lines(string(data)) {
			_, ref, ok := strings.Cut(line, "image:")
			ref = strings.TrimSpace(ref)
			if !ok || !strings.HasPrefix(ref, "ghcr.io/bucketops/") {
				continue
			}
			n++
			if _, tag, _ := strings.Cut(strings.TrimPrefix(ref, "ghcr.io/bucketops/"), ":"); tag != version {
				t.Errorf("%s names %s, want the tag of VERSION, %s: make release VERSION=%s pins it", m, ref, version, version)
			}
		}
		if n == 0 {
			t.Errorf("%s names no ghcr.io/bucketops image", m)
		}
	}
}
