package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
)

func newShow(e *env) *cobra.Command {
	var raw bool
	var trust trustFlags
	cmd := &cobra.Command{
		Use:   "show APP[@GENERATION|@COMMIT]",
		Short: "Show a release: its record and its manifests",
		Long: `show prints a release's record (who, when, from what, its size and how it is
stored) and its manifests, after decompressing them and checking them against
their recorded digest. SOPS-encrypted documents are shown as stored, encrypted.
Without @GENERATION it shows the head. The commit is the release's revision in
the bridge's git view, the SHA Argo CD shows. --raw prints the manifest stream
alone, decompressed: its sha256 is the digest.

The signature line judges the release by the keys given (--key) or the trust
policy's rule for the app (--trust-policy), as the bridge does before serving
it: verified (by which key, under which rule), unsigned, or broken (the
problem, as verify names it, and why); the bytes are checked against the
signed digest too. Without either flag it says "not checked".`,
		Example: `  bucketops show prod/payments
  bucketops show prod/payments --key ci-2026.pub
  bucketops show prod/payments@1733150000000000 --raw > release.yaml`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			arg, err := parseRelease(a[0])
			if err != nil {
				return err
			}
			judge, err := trust.judge(cmd.Context())
			if err != nil {
				return err
			}
			if raw && judge.Checks() {
				return usagef("--raw prints the manifest stream alone; leave out --key and --trust-policy, or --raw")
			}
			s, closeStore, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			ref, err := arg.resolve(cmd.Context(), e, s)
			if err != nil {
				return err
			}
			rel, data, err := s.Read(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if raw {
				_, err = e.stdout.Write(data)
				return err
			}
			hist, byGen, err := e.commits(cmd.Context(), s, ref.App)
			if err != nil {
				return err
			}
			sig := judge.Read(rel, hist, data)
			if e.json() {
				return e.printJSON(struct {
					store.Release
					Commit          string            `json:"commit"`
					SignatureStatus provenance.Status `json:"signature"`
					Manifests       string            `json:"manifests"`
				}{rel, byGen[rel.Generation], sig, string(data)})
			}
			tw := e.table()
			seq := "-"
			if rel.Sequence != 0 {
				seq = fmt.Sprint(rel.Sequence)
			}
			for _, row := range [][2]string{
				{"release", rel.Ref().String()},
				{"commit", orDash(byGen[rel.Generation])},
				{"kind", rel.Kind},
				{"head", fmt.Sprint(rel.Current)},
				{"time", formatTime(rel.Time)},
				{"sequence", seq},
				{"author", orDash(rel.Author)},
				{"source", orDash(rel.Source)},
				{"origin", orDash(rel.Origin)},
				{"labels", orDash(store.EncodeLabels(rel.Labels))},
				{"message", orDash(rel.Message)},
				{"resources", fmt.Sprint(rel.Resources)},
				{"digest", rel.Digest},
				{"size", sizeLine(rel)},
				{"signature", sig.String()},
			} {
				fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(data) > 0 {
				fmt.Fprintln(e.stdout, "---")
			}
			_, err = e.stdout.Write(data)
			return err
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "print only the manifest stream, decompressed, exactly (digest checked)")
	trust.register(cmd)
	return cmd
}

// sizeLine says how long a release is and what the bucket holds of it:
// "51,200 bytes (12,034 stored, zstd)".
func sizeLine(rel store.Release) string {
	stored := "stored uncompressed"
	if rel.Encoding != "" {
		stored = thousands(rel.StoredSize) + " stored, " + rel.Encoding
	}
	return thousands(rel.Size) + " bytes (" + stored + ")"
}

// thousands writes n, a size, with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
