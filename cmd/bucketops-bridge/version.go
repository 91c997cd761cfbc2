package main

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// version is set at build time, as the CLI's is: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// healthTimeout bounds --health-check: well inside the image's
// HEALTHCHECK timeout, so a slow answer is this check's failure, with its
// message, rather than Docker killing it.
const healthTimeout = 3 * time.Second

// printVersion is --version, in the words of bucketops version.
func printVersion(w io.Writer) error {
	_, err := fmt.Fprintf(w, "bucketops-bridge %s (%s)\n", version, runtime.Version())
	return err
}
