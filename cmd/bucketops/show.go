package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

func newShow(e *env) *cobra.Command {
	var raw bool
	cmd := &cobra.Command{
		Use:   "show APP[@GENERATION]",
		Short: "Show a release: its record and its manifests",
		Long: `show prints a release's record (who, when, from what, its size and how it is
stored) and its manifests, after decompressing them and checking them against
their recorded digest. SOPS-encrypted documents are shown as stored, encrypted.
Without @GENERATION it shows the head. The commit is the release's revision in
the bridge's git view, the SHA Argo CD shows. --raw prints the manifest stream
alone, decompressed: its sha256 is the digest.`,
		Example: `  bucketops show prod/payments
  bucketops show prod/payments@1733150000000000 --raw > release.yaml`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			ref, err := store.ParseRef(a[0])
			if err != nil {
				return err
			}
			s, closeStore, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			rel, data, err := s.Read(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if raw {
				_, err = e.stdout.Write(data)
				return err
			}
			_, byGen, err := commits(cmd.Context(), s, ref.App)
			if err != nil {
				return err
			}
			if e.json() {
				return e.printJSON(struct {
					store.Release
					Commit    string `json:"commit"`
					Manifests string `json:"manifests"`
				}{rel, byGen[rel.Generation], string(data)})
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
