// Command imagebuild writes the bucketops container images (package image)
// from binaries built beforehand: as a docker save tarball for one platform
// (make images), or as OCI image layouts with a multi-platform index and the
// digests in images.txt (make release). Nothing is pulled or pushed.
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b image.Batch
	fs.StringVar(&b.BinDir, "bin", "bin/dist", "the binaries, as DIR/OS_ARCH/NAME")
	platforms := fs.String("platforms", "linux/amd64", "platforms, space or comma separated")
	fs.StringVar(&b.Version, "version", "", "the version: the tag, and the version label")
	fs.StringVar(&b.Revision, "revision", "", "the commit the binaries were built from")
	fs.StringVar(&b.Repository, "repository", image.Repository, "images are named REPOSITORY/NAME:VERSION")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the commit's time in Unix seconds, stamped on every file (default $SOURCE_DATE_EPOCH)")
	caCerts := fs.String("ca-certs", image.CACertsPath, "the CA bundle to put in the images")
	docker := fs.String("docker", "", "write a docker save tarball of the one platform here")
	oci := fs.String("oci", "", "write an OCI image layout per image under this directory")
	digests := fs.String("digests", "", "with -oci: write the digests here (images.txt)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if (*docker == "") == (*oci == "") {
		errs = append(errs, errors.New("give one of -docker FILE and -oci DIR"))
	}
	if *digests != "" && *oci == "" {
		errs = append(errs, errors.New("-digests goes with -oci"))
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || secs <= 0 {
		errs = append(errs, fmt.Errorf("-source-date-epoch %q: want the commit's time in Unix seconds (git log -1 --format=%%ct)", *epoch))
	}
	b.Created = time.Unix(secs, 0).UTC()
	if b.Platforms, err = image.ParsePlatforms(*platforms); err != nil {
		errs = append(errs, fmt.Errorf("-platforms: %w", err))
	}
	if b.CACerts, err = os.ReadFile(*caCerts); err != nil {
		errs = append(errs, fmt.Errorf("-ca-certs: %w (Debian: apt-get install ca-certificates)", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	if *docker != "" {
		if err := b.WriteDocker(*docker); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *docker)
		return nil
	}
	sums, err := b.WriteLayouts(*oci)
	if err != nil {
		return err
	}
	if *digests != "" {
		if err := os.MkdirAll(filepath.Dir(*digests), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(*digests, sums, 0o644); err != nil {
			return err
		}
	}
	_, err = stdout.Write(sums)
	return err
}
