// Command fleetlevers writes the table of what each lever of the install
// bought in the fleet race (make bench-argocd-levers) into its section of
// docs/benchmarks.md, from the race's JSON reports, one per step, given
// in order.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/bucketops/bucketops/bench/fleet"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fleetlevers:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("fleetlevers", flag.ContinueOnError)
	doc := fs.String("doc", "docs/benchmarks.md", "the doc whose bench-argocd-levers section is rewritten")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: fleetlevers [-doc FILE] REPORT.json…")
	}
	var steps []fleet.Report
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r fleet.Report
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		steps = append(steps, r)
	}
	return fleet.WriteLevers(*doc, steps)
}
