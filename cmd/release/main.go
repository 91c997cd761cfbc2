// Command release writes the files of a release besides its images (package
// release): a tar.gz of the binaries per platform, SHA256SUMS over them and
// images.txt, and the version pinned in VERSION and the Kubernetes
// manifests. make release runs it after cmd/imagebuild.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/bucketops/bucketops/image"
	"github.com/bucketops/bucketops/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the release, vMAJOR.MINOR.PATCH")
	bin := fs.String("bin", "bin/dist", "the binaries, as DIR/OS_ARCH/NAME")
	platforms := fs.String("platforms", "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64", "platforms to archive, space or comma separated")
	out := fs.String("out", "bin/release", "where the archives and SHA256SUMS go; images.txt there is summed too")
	root := fs.String("root", ".", "the repository whose VERSION and manifests get the version")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the commit's time in Unix seconds (default $SOURCE_DATE_EPOCH)")
	check := fs.Bool("check", false, "only check -version, before make release spends minutes building")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *check {
		return release.CheckVersion(*version)
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := release.CheckVersion(*version); err != nil {
		errs = append(errs, fmt.Errorf("-version: %w", err))
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || secs <= 0 {
		errs = append(errs, fmt.Errorf("-source-date-epoch %q: want the commit's time in Unix seconds (git log -1 --format=%%ct)", *epoch))
	}
	ps, err := image.ParsePlatforms(*platforms)
	if err != nil {
		errs = append(errs, fmt.Errorf("-platforms: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var summed []string
	for _, p := range ps {
		dir := p.OS + "_" + p.Architecture
		var files []release.File
		// Each archive holds the programs the images are made of.
		for _, r := range image.Recipes {
			files = append(files, release.File{Name: r.Name, Path: filepath.Join(*bin, dir, r.Name), Mode: 0o755})
		}
		archive := fmt.Sprintf("bucketops_%s_%s.tar.gz", *version, dir)
		if err := release.WriteArchive(filepath.Join(*out, archive), files, time.Unix(secs, 0)); err != nil {
			return err
		}
		summed = append(summed, archive)
	}
	if _, err := os.Stat(filepath.Join(*out, "images.txt")); err == nil {
		summed = append(summed, "images.txt")
	}
	if err := release.WriteChecksums(*out, summed); err != nil {
		return err
	}
	if err := release.Pin(*root, *version); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d archives, SHA256SUMS; pinned %s in VERSION and %d manifests\n", *out, len(ps), *version, len(release.Manifests))
	return nil
}
