package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/bucketops/bucketops/store"
)

// rawObject is the bare client's view of an app's object in the emulator
// startBucket runs: what the bucket holds, not what bucketops says of it.
func rawObject(t *testing.T, bucket, app string) *storage.ObjectHandle {
	t.Helper()
	client, err := storage.NewClient(t.Context(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client.Bucket(bucket).Object(app + "/" + store.ObjectName)
}

func rawAttrs(t *testing.T, bucket, app string) *storage.ObjectAttrs {
	t.Helper()
	attrs, err := rawObject(t, bucket, app).Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

func sha256Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sizeRow is show's size line: "51,200 bytes (12,034 stored, zstd)".
var sizeRow = regexp.MustCompile(`(?m)^size:\s+([0-9,]+) bytes \((.*)\)$`)

func shownSize(t *testing.T, shown string) (int64, string) {
	t.Helper()
	m := sizeRow.FindStringSubmatch(shown)
	if m == nil {
		t.Fatalf("show has no size line:\n%s", shown)
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n, m[2]
}

func TestCompressedReleasesRoundTrip(t *testing.T) {
	emu := startBucket(t)
	files := map[string]string{}
	for i := range 60 {
		files[fmt.Sprintf("cm-%02d.yaml", i)] = configMap(fmt.Sprintf("settings-%02d", i), strings.Repeat("x", 200))
	}
	v1 := writeFiles(t, files)
	files["cm-07.yaml"] = configMap("settings-07", "changed")
	v2 := writeFiles(t, files)

	first := decode[map[string]any](t, bucketops(t, "", "push", "prod/payments", v1, "--sequence", "1", "-o", "json").must(t).stdout)
	size, stored := first["size"].(float64), first["stored_size"].(float64)
	if first["encoding"] != "zstd" || stored <= 0 || stored >= size/2 {
		t.Errorf("push -o json: encoding %v, size %v, stored_size %v; want zstd, stored well under size", first["encoding"], size, stored)
	}
	attrs := rawAttrs(t, emu.Bucket(), "prod/payments")
	if attrs.ContentEncoding != "zstd" || float64(attrs.Size) != stored || attrs.Metadata["bucketops-size"] != fmt.Sprint(int64(size)) {
		t.Errorf("the object: Content-Encoding %q, %d bytes, bucketops-size %q; want zstd, %v, %v", attrs.ContentEncoding, attrs.Size, attrs.Metadata["bucketops-size"], stored, size)
	}
	gen1 := fmt.Sprintf("%.0f", first["generation"])

	shown := bucketops(t, "", "show", "prod/payments").must(t).stdout
	n, how := shownSize(t, shown)
	if n != int64(size) || how != fmt.Sprintf("%s stored, zstd", thousands(int64(stored))) {
		t.Errorf("show's size line says %d bytes (%s), want %v bytes (%s stored, zstd)", n, how, size, thousands(int64(stored)))
	}
	raw := bucketops(t, "", "show", "prod/payments", "--raw").must(t).stdout
	if int64(len(raw)) != int64(size) || sha256Digest(raw) != first["digest"] || !strings.HasPrefix(raw, "# Source: cm-00.yaml\n") {
		t.Errorf("show --raw: %d bytes hashing to %s, want the %v-byte stream of digest %v", len(raw), sha256Digest(raw), size, first["digest"])
	}
	js := decode[map[string]any](t, bucketops(t, "", "show", "prod/payments", "-o", "json").must(t).stdout)
	if js["encoding"] != "zstd" || js["stored_size"] != stored || js["size"] != size || js["manifests"] != raw {
		t.Errorf("show -o json: encoding %v, stored_size %v, size %v", js["encoding"], js["stored_size"], js["size"])
	}

	bucketops(t, "", "push", "prod/payments", v2, "--sequence", "2").must(t)
	log := decode[[]map[string]any](t, bucketops(t, "", "log", "prod/payments", "-o", "json").must(t).stdout)
	for _, r := range log {
		if r["encoding"] != "zstd" || r["stored_size"] == nil || r["stored_size"].(float64) >= r["size"].(float64) {
			t.Errorf("log -o json entry: encoding %v, size %v, stored_size %v", r["encoding"], r["size"], r["stored_size"])
		}
	}
	diff := bucketops(t, "", "diff", "prod/payments@"+gen1, "prod/payments").must(t).stdout
	if !strings.Contains(diff, "changed ConfigMap pay/settings-07") || !strings.Contains(diff, "0 added, 0 removed, 1 changed, 59 unchanged") {
		t.Errorf("diff of two compressed releases:\n%s", diff)
	}

	promoted := decode[map[string]any](t, bucketops(t, "", "promote", "prod/payments@"+gen1, "live/payments", "-o", "json").must(t).stdout)
	back := decode[map[string]any](t, bucketops(t, "", "rollback", "prod/payments", "--to", gen1, "-o", "json").must(t).stdout)
	for app, res := range map[string]map[string]any{"live/payments": promoted, "prod/payments": back} {
		attrs := rawAttrs(t, emu.Bucket(), app)
		if res["encoding"] != "zstd" || attrs.ContentEncoding != "zstd" || res["digest"] != first["digest"] || float64(attrs.Size) != stored || attrs.Metadata["bucketops-size"] != fmt.Sprint(int64(size)) {
			t.Errorf("the copy in %s: encoding %v (object %q, %d bytes, bucketops-size %q), digest %v; want the source's zstd object of %v bytes, %v uncompressed",
				app, res["encoding"], attrs.ContentEncoding, attrs.Size, attrs.Metadata["bucketops-size"], res["digest"], stored, size)
		}
		if got := bucketops(t, "", "show", app, "--raw").must(t).stdout; got != raw {
			t.Errorf("show --raw of the copy in %s differs from the source's stream", app)
		}
	}

	t.Run("a release from before compression is shown, diffed and promoted as before", func(t *testing.T) {
		legacy := bucketops(t, "", "show", "prod/payments@"+gen1, "--raw").must(t).stdout
		w := rawObject(t, emu.Bucket(), "old/payments").NewWriter(t.Context())
		w.ContentType = store.ContentType
		w.Metadata = map[string]string{"bucketops-digest": sha256Digest(legacy), "bucketops-kind": "release", "bucketops-resources": "60", "bucketops-sequence": "1"}
		if _, err := w.Write([]byte(legacy)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}

		shown := bucketops(t, "", "show", "old/payments").must(t).stdout
		if n, how := shownSize(t, shown); n != int64(len(legacy)) || how != "stored uncompressed" {
			t.Errorf("show of an uncompressed release says %d bytes (%s), want %d bytes (stored uncompressed)", n, how, len(legacy))
		}
		if got := bucketops(t, "", "show", "old/payments", "--raw").must(t).stdout; got != legacy {
			t.Error("show --raw of an uncompressed release isn't its bytes")
		}
		rel := decode[map[string]any](t, bucketops(t, "", "show", "old/payments", "-o", "json").must(t).stdout)
		if rel["encoding"] != "" || rel["size"] != float64(len(legacy)) || rel["stored_size"] != float64(len(legacy)) {
			t.Errorf("show -o json of an uncompressed release: encoding %q, size %v, stored_size %v", rel["encoding"], rel["size"], rel["stored_size"])
		}
		if d := bucketops(t, "", "diff", "old/payments", "prod/payments").must(t).stdout; !strings.HasPrefix(d, "no changes between old/payments@") {
			t.Errorf("diff of an uncompressed release against the same manifests compressed:\n%s", d)
		}
		if d := bucketops(t, "", "diff", "old/payments", "prod/payments@"+fmt.Sprintf("%.0f", log[0]["generation"])).must(t).stdout; !strings.Contains(d, "1 changed") {
			t.Errorf("diff of an uncompressed release against a changed one:\n%s", d)
		}

		res := decode[map[string]any](t, bucketops(t, "", "promote", "old/payments", "old/live", "-o", "json").must(t).stdout)
		attrs := rawAttrs(t, emu.Bucket(), "old/live")
		if res["encoding"] != "" || attrs.ContentEncoding != "" || attrs.Size != int64(len(legacy)) || res["digest"] != sha256Digest(legacy) {
			t.Errorf("promote of an uncompressed release: encoding %v (object %q, %d bytes), digest %v; want it copied as it is", res["encoding"], attrs.ContentEncoding, attrs.Size, res["digest"])
		}
		if got := bucketops(t, "", "show", "old/live", "--raw").must(t).stdout; got != legacy {
			t.Error("show --raw of the promoted uncompressed release isn't its bytes")
		}
	})
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 51200: "51,200", 12034: "12,034", 10485760: "10,485,760"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
