package main

import (
	"bytes"
	"io"
	"os/exec"
	"strconv"
	"testing"
)

// TestShowRawIsWhatTheAuditorsPipelinePrints: docs/ui.md tells an auditor
// with only gcloud to read a release as `gcloud storage cat
// gs://…/manifests.yaml#GEN | zstd -d` and to compare its sha256 with the
// object's bucketops-digest. The object's bytes as stored, through the
// zstd command line tool, are byte for byte what show --raw prints, and
// hash to the digest.
func TestShowRawIsWhatTheAuditorsPipelinePrints(t *testing.T) {
	zstdCLI, err := exec.LookPath("zstd")
	if err != nil {
		t.Skip("no zstd command line tool")
	}
	emu := startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "audited"), "more.yaml": configMap("other", "x")})
	bucketops(t, "", "push", "prod/payments", dir, "--sequence", "1").must(t)
	gen := rawAttrs(t, emu.Bucket(), "prod/payments").Generation

	// What gcloud storage cat and the Console's download give: the stored
	// bytes, not decompressed (GCS transcodes gzip only).
	r, err := rawObject(t, emu.Bucket(), "prod/payments").Generation(gen).NewReader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(stored, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("the stored object is not a zstd frame: % x…", stored[:min(8, len(stored))])
	}
	cmd := exec.CommandContext(t.Context(), zstdCLI, "-d", "-c")
	cmd.Stdin = bytes.NewReader(stored)
	plain, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd -d of the stored object: %v", err)
	}
	raw := bucketops(t, "", "show", "prod/payments@"+strconv.FormatInt(gen, 10), "--raw").must(t).stdout
	if string(plain) != raw {
		t.Errorf("zstd -d of the stored object (%d bytes) is not what show --raw prints (%d bytes)", len(plain), len(raw))
	}
	if got, want := sha256Digest(string(plain)), rawAttrs(t, emu.Bucket(), "prod/payments").Metadata["bucketops-digest"]; got != want {
		t.Errorf("sha256 of the decompressed object is %s, bucketops-digest says %s", got, want)
	}
}
