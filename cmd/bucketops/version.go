package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func newVersion(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.json() {
				return e.printJSON(map[string]string{"version": version, "go": runtime.Version()})
			}
			_, err := fmt.Fprintf(e.stdout, "bucketops %s (%s)\n", version, runtime.Version())
			return err
		},
	}
}
