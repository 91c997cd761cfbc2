package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

func newPush(e *env) *cobra.Command {
	var f publishFlags
	var w waitFlags
	var summaryFile string
	var r retryFlags
	cmd := &cobra.Command{
		Use:   "push APP PATH|-",
		Short: "Validate manifests and publish them as the app's new release",
		Long: `push reads every *.yaml, *.yml and *.json file under PATH (or one stream from
standard input with -), checks that each document is a Kubernetes object or a
SOPS-encrypted one, assembles them into the canonical stream and publishes it
as a new generation of APP.

Publishing the bytes the head already holds prints "unchanged" and exits 0, so
CI retries are safe. A release whose --sequence is lower than the head's is
refused as stale (exit 4).

With --wait, push then waits until Argo CD has deployed the release (exit 0) or
failed to (exit 5), as bucketops wait does.`,
		Example: `  bucketops push prod/payments ./rendered --sequence "$GITHUB_RUN_NUMBER"
  helm template ./chart | bucketops push prod/payments - --sequence 42 -o json`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) (err error) {
			app, path := a[0], a[1]
			sum, err := openSummary(cmd, e, summaryFile)
			if err != nil {
				return err
			}
			// The summary gets a row whatever the outcome: a pipeline's
			// reader wants to see the stale or failed push too.
			row := summaryRow{app: app}
			var published *store.Result
			if sum != nil {
				defer func() {
					row.status = pushStatus(published, w.wait, err)
					if werr := errors.Join(sum.add(row), sum.close()); werr != nil {
						fmt.Fprintf(e.stderr, "bucketops: --summary: %v\n", werr)
					}
				}()
			}
			if err := store.ValidateApp(app); err != nil {
				return err
			}
			if err := f.validate(e); err != nil {
				return err
			}
			if r.retries < 0 || r.delay < 0 {
				return usagef("--retries %d, --retry-delay %s: give a count and a delay of 0 or more", r.retries, r.delay)
			}
			pol, err := f.policy(e)
			if err != nil {
				return err
			}
			var rel *render.Release
			if path == "-" {
				rel, err = render.AssembleStream("stdin", e.stdin)
			} else {
				rel, err = render.AssembleDir(path)
			}
			if err != nil {
				return err
			}
			row.digest = rel.Digest
			if err := checkRelease(pol, app, rel.Objects); err != nil {
				return err
			}
			if pol == nil {
				warnPlaintextSecrets(e.stderr, app, rel.Objects)
			}
			p := f.publication(cmd, e)
			p.Data = rel.Bytes
			p.Resources = rel.Resources()

			closeSigner, err := f.sign(cmd.Context(), e, &p)
			if err != nil {
				return err
			}
			defer closeSigner()
			// Again, as a whole, while the failure may heal: a write that
			// landed behind an error is this push's own (unchanged).
			return e.retry("push "+app, r, func(ctx context.Context) error {
				s, closeStore, err := e.openStore(ctx)
				if err != nil {
					return err
				}
				defer closeStore()
				if w.wait {
					// Check before publishing, not after.
					if err := e.checkWait(ctx, app); err != nil {
						return fmt.Errorf("--wait: %w; nothing was published", err)
					}
				}
				res, err := s.Publish(ctx, app, p)
				if err != nil {
					return err
				}
				published, row.generation, row.digest = &res, res.Generation, res.Digest
				if !w.wait {
					return e.printResult(res)
				}
				if !e.json() {
					if err := e.printResult(res); err != nil {
						return err
					}
				}
				return e.waitDeployed(cmd, res.Ref(), w.timeout)
			})
		},
	}
	f.register(cmd, true)
	w.register(cmd, true)
	cmd.Flags().IntVar(&r.retries, "retries", 0, "run the push again up to this many times when it fails in a way that may heal (GCS or the bridge answering 429 or 5xx, the network, --timeout); never for a refused token or credentials, invalid input, stale or conflict")
	cmd.Flags().DurationVar(&r.delay, "retry-delay", 15*time.Second, "wait this long before the first retry, twice as long before the second, and so on")
	cmd.Flags().StringVar(&summaryFile, "summary", "", "append a Markdown table row (app, generation, digest, status) to this file, whatever the outcome (default $GITHUB_STEP_SUMMARY)")
	return cmd
}

// publishOutput is the -o json contract of every verb that writes a release.
type publishOutput struct {
	App        string `json:"app"`
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
	Sequence   uint64 `json:"sequence"`
	Resources  int    `json:"resources"`
	Kind       string `json:"kind"`
	Origin     string `json:"origin,omitempty"`
	Unchanged  bool   `json:"unchanged"`
	// Size is the manifest stream's length, StoredSize the object's, as
	// Encoding stores it ("zstd", or "" for a release from before
	// compression that promote or rollback copied).
	Size       int64  `json:"size"`
	StoredSize int64  `json:"stored_size"`
	Encoding   string `json:"encoding"`
	// SupersededBy: the release was published, but a newer one replaced it
	// before push could confirm its write.
	SupersededBy int64 `json:"superseded_by,omitempty"`
}

func (e *env) printResult(res store.Result) error {
	if e.json() {
		return e.printJSON(publishOutput{
			App: res.App, Generation: res.Generation, Digest: res.Digest, Sequence: res.Sequence,
			Resources: res.Resources, Kind: res.Kind, Origin: res.Origin, Unchanged: res.Unchanged,
			Size: res.Size, StoredSize: res.StoredSize, Encoding: res.Encoding, SupersededBy: res.SupersededBy,
		})
	}
	verb := "published"
	switch {
	case res.Unchanged:
		verb = "unchanged"
	case res.Kind == store.KindTombstone:
		verb = "retired"
	}
	detail := fmt.Sprintf("%d resources, %s", res.Resources, res.Digest)
	if res.Origin != "" {
		detail += ", from " + res.Origin
	}
	if res.SupersededBy != 0 {
		detail += fmt.Sprintf(", already superseded by generation %d", res.SupersededBy)
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s (%s)\n", verb, res.Ref(), detail)
	return err
}
