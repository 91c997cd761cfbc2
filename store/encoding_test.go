package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/klauspost/compress/zstd"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// bigManifest is a compressible release of about n bytes: what CI
// publishes, many similar objects.
func bigManifest(app string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "# Source: cm-%d.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\n  namespace: pay\ndata:\n  value: %q\n---\n",
			i, strings.ReplaceAll(app, "/", "-"), i, strconv.Itoa(i*7919))
	}
	return b.Bytes()
}

func zstdOf(t *testing.T, data []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(data, nil)
}

func TestPublishStoresTheReleaseCompressed(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	app := "prod/payments"
	data := bigManifest(app, 50<<10)
	res, err := s.Publish(t.Context(), app, store.Publication{Data: data, Sequence: 1, Resources: 1})
	if err != nil {
		t.Fatal(err)
	}
	attrs := tb.Attrs(t, app+"/manifests.yaml", 0)
	if attrs.ContentEncoding != store.EncodingZstd {
		t.Errorf("the object's Content-Encoding is %q, want zstd", attrs.ContentEncoding)
	}
	if attrs.Size >= int64(len(data))/2 {
		t.Errorf("a %d-byte compressible release is stored in %d bytes, want less than half", len(data), attrs.Size)
	}
	if got := attrs.Metadata["bucketops-size"]; got != strconv.Itoa(len(data)) {
		t.Errorf("bucketops-size is %q, want the uncompressed length %d", got, len(data))
	}
	// The digest is over the manifests, not over what the bucket holds, so
	// existing digests and signatures hold whatever the storage.
	if res.Digest != store.Digest(data) || attrs.Metadata["bucketops-digest"] != store.Digest(data) {
		t.Errorf("digest %s (metadata %s), want sha256 of the uncompressed stream %s", res.Digest, attrs.Metadata["bucketops-digest"], store.Digest(data))
	}
	if res.Size != int64(len(data)) || res.StoredSize != attrs.Size || res.Encoding != store.EncodingZstd {
		t.Errorf("published release: size %d, stored %d, encoding %q; want %d, %d, zstd", res.Size, res.StoredSize, res.Encoding, len(data), attrs.Size)
	}

	// What the bucket holds is a plain zstd stream of the manifests, read
	// with the bare client (its CRC32C checked: GCS serves zstd as stored).
	r, err := tb.Client.Bucket(storetest.BucketName).Object(app + "/manifests.yaml").NewReader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	if plain, err := dec.DecodeAll(raw, nil); err != nil || !bytes.Equal(plain, data) {
		t.Errorf("the stored bytes don't decompress to the release (%v)", err)
	}

	rel, got, err := s.Read(t.Context(), store.Ref{App: app})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes (%v), want the %d published", len(got), err, len(data))
	}
	if rel.Size != int64(len(data)) || rel.StoredSize != attrs.Size || rel.Encoding != store.EncodingZstd {
		t.Errorf("read: size %d, stored %d, encoding %q", rel.Size, rel.StoredSize, rel.Encoding)
	}
	hist, err := s.History(t.Context(), app, store.HistoryOptions{Limit: 2})
	if err == nil && len(hist) == 1 {
		// The listing's releases carry the encoding and sizes too (it
		// selects the attributes it reads).
		if h := hist[0]; h.Encoding != store.EncodingZstd || h.Size != int64(len(data)) || h.StoredSize != attrs.Size {
			t.Errorf("history: size %d, stored %d, encoding %q", h.Size, h.StoredSize, h.Encoding)
		}
		if b, err := s.Bytes(t.Context(), hist[0]); err != nil || !bytes.Equal(b, data) {
			t.Errorf("bytes of the listed release: %d bytes, %v", len(b), err)
		}
	} else {
		t.Errorf("history: %+v %v", hist, err)
	}

	// The same manifests again are unchanged: the digest didn't move.
	if again, err := s.Publish(t.Context(), app, store.Publication{Data: data, Sequence: 1, Resources: 1}); err != nil || !again.Unchanged {
		t.Errorf("re-publish: %+v %v, want unchanged", again, err)
	}

	t.Run("a tombstone stays empty and uncompressed", func(t *testing.T) {
		res, err := s.Retire(t.Context(), app, store.Publication{})
		if err != nil {
			t.Fatal(err)
		}
		attrs := tb.Attrs(t, app+"/manifests.yaml", 0)
		if attrs.Size != 0 || attrs.ContentEncoding != "" || res.Size != 0 || res.Encoding != "" {
			t.Errorf("tombstone: %d bytes stored with %q, release size %d", attrs.Size, attrs.ContentEncoding, res.Size)
		}
	})
}

// A release published before compression: plain bytes, no
// Content-Encoding, no bucketops-size.
func putLegacy(t *testing.T, tb *storetest.Bucket, app string, data []byte) {
	t.Helper()
	tb.Put(t, app+"/manifests.yaml", data, map[string]string{
		"bucketops-digest": store.Digest(data), "bucketops-kind": "release", "bucketops-resources": "1", "bucketops-sequence": "1",
	})
}

func TestUncompressedReleasesReadAsBefore(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	data := bigManifest("prod/old", 4<<10)
	putLegacy(t, tb, "prod/old", data)
	rel, got, err := s.Read(t.Context(), store.Ref{App: "prod/old"})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of an uncompressed release: %v", err)
	}
	if rel.Encoding != "" || rel.Size != int64(len(data)) || rel.StoredSize != int64(len(data)) {
		t.Errorf("uncompressed release: size %d, stored %d, encoding %q; want %d, %d, none", rel.Size, rel.StoredSize, rel.Encoding, len(data), len(data))
	}
	// Publishing the same manifests is unchanged: nothing is rewritten
	// just to compress it.
	if res, err := s.Publish(t.Context(), "prod/old", store.Publication{Data: data, Resources: 1}); err != nil || !res.Unchanged {
		t.Errorf("publishing an uncompressed release's manifests again: %+v %v, want unchanged", res, err)
	}
}

func TestCopyKeepsTheSourcesEncoding(t *testing.T) {
	// watchCopies records what each rewrite request asks the destination's
	// Content-Encoding to be ("" when it left it out).
	watchCopies := func(tb *storetest.Bucket) *atomic.Pointer[string] {
		var asked atomic.Pointer[string]
		tb.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/rewriteTo/") {
				return false
			}
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var dst struct {
				ContentEncoding string `json:"contentEncoding"`
			}
			json.Unmarshal(body, &dst)
			asked.Store(&dst.ContentEncoding)
			return false
		})
		return &asked
	}
	cases := []struct {
		name     string
		publish  func(t *testing.T, tb *storetest.Bucket, s *store.Store, data []byte) store.Release
		encoding string
	}{
		{"a compressed release is copied compressed", func(t *testing.T, tb *storetest.Bucket, s *store.Store, data []byte) store.Release {
			res, err := s.Publish(t.Context(), "staging/api", store.Publication{Data: data, Sequence: 1, Resources: 1})
			if err != nil {
				t.Fatal(err)
			}
			return res.Release
		}, store.EncodingZstd},
		{"an uncompressed release is copied uncompressed", func(t *testing.T, tb *storetest.Bucket, s *store.Store, data []byte) store.Release {
			putLegacy(t, tb, "staging/api", data)
			rel, err := s.Head(t.Context(), "staging/api")
			if err != nil {
				t.Fatal(err)
			}
			return rel
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := storetest.New(t, true)
			s := tb.Store(t, "")
			data := bigManifest("staging/api", 20<<10)
			src := c.publish(t, tb, s, data)
			asked := watchCopies(tb)
			for _, dst := range []string{"prod/api", "staging/api"} { // promote, then rollback
				if dst == src.App {
					// A rollback replaces a newer head.
					if _, err := s.Publish(t.Context(), dst, store.Publication{Data: bigManifest("v2", 1<<10), Resources: 1}); err != nil {
						t.Fatal(err)
					}
				}
				res, err := s.Copy(t.Context(), src.Ref(), dst, store.Publication{Message: "copy"})
				if err != nil {
					t.Fatal(err)
				}
				if a := asked.Load(); a == nil {
					t.Errorf("copy to %s made no rewrite request", dst)
				} else if *a != c.encoding {
					t.Errorf("copy to %s: the rewrite asked for Content-Encoding %q, want %q named explicitly", dst, *a, c.encoding)
				}
				attrs := tb.Attrs(t, dst+"/manifests.yaml", 0)
				if attrs.ContentEncoding != c.encoding || res.Encoding != c.encoding {
					t.Errorf("copy to %s is stored with %q (reported %q), want %q like its source", dst, attrs.ContentEncoding, res.Encoding, c.encoding)
				}
				if attrs.Size != src.StoredSize || attrs.Metadata["bucketops-size"] != strconv.Itoa(len(data)) {
					t.Errorf("copy to %s: %d bytes stored, bucketops-size %q; want the source's %d and %d", dst, attrs.Size, attrs.Metadata["bucketops-size"], src.StoredSize, len(data))
				}
				rel, got, err := s.Read(t.Context(), store.Ref{App: dst})
				if err != nil || !bytes.Equal(got, data) || rel.Digest != store.Digest(data) || rel.Size != int64(len(data)) {
					t.Errorf("read of the copy in %s: %d bytes, size %d, %v", dst, len(got), rel.Size, err)
				}
			}
		})
	}
}

func TestReadRefusesDamagedCompressedReleases(t *testing.T) {
	data := bigManifest("prod/api", 8<<10)
	good := zstdOf(t, data)
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0xff
	bomb := make([]byte, store.MaxReleaseBytes+1)
	var streamed bytes.Buffer // a frame that doesn't declare its size
	zw, _ := zstd.NewWriter(&streamed)
	zw.Write(bomb)
	zw.Close()
	meta := func(digest string, size int) map[string]string {
		m := map[string]string{"bucketops-digest": digest}
		if size >= 0 {
			m["bucketops-size"] = strconv.Itoa(size)
		}
		return m
	}
	cases := []struct {
		name     string
		stored   []byte
		encoding string
		meta     map[string]string
		want     string
	}{
		{"garbage declared as zstd", []byte("this is not zstd at all, just text"), "zstd", meta(store.Digest(data), len(data)), "not a valid zstd stream"},
		{"a zstd stream with a damaged byte", flipped, "zstd", meta(store.Digest(data), len(data)), "zstd"},
		{"a truncated zstd stream", good[:len(good)/2], "zstd", meta(store.Digest(data), len(data)), "not a valid zstd stream"},
		{"a bomb that declares its size", zstdOf(t, bomb), "zstd", meta(store.Digest(bomb), len(bomb)), "inflates past"},
		{"a bomb that doesn't declare its size", streamed.Bytes(), "zstd", meta(store.Digest(bomb), -1), "inflates past"},
		{"a size that isn't the stream's", good, "zstd", meta(store.Digest(data), len(data)+1), "bucketops-size says"},
		{"bytes that don't match the digest", zstdOf(t, []byte("kind: Evil\n")), "zstd", meta(store.Digest(data), len(data)), "bucketops-digest says"},
		{"an encoding bucketops never writes", good, "br", meta(store.Digest(data), len(data)), `Content-Encoding "br"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := storetest.New(t, true)
			s := tb.Store(t, "")
			tb.PutEncoded(t, "prod/api/manifests.yaml", c.stored, c.encoding, c.meta)
			_, got, err := s.Read(t.Context(), store.Ref{App: "prod/api"})
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("read: %v, want ErrCorrupt saying %q", err, c.want)
			}
			if !strings.Contains(fmt.Sprint(err), "publish it again") {
				t.Errorf("the error doesn't tell what to do: %v", err)
			}
			if got != nil {
				t.Errorf("a damaged release returned %d bytes", len(got))
			}
			if _, err := s.Copy(t.Context(), store.Ref{App: "prod/api"}, "prod/copy", store.Publication{}); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("copy of a damaged release: %v, want ErrCorrupt", err)
			}
		})
	}

	t.Run("a compressed release without bucketops-size reads, counted at the cap until then", func(t *testing.T) {
		tb := storetest.New(t, true)
		s := tb.Store(t, "")
		tb.PutEncoded(t, "prod/api/manifests.yaml", good, "zstd", meta(store.Digest(data), -1))
		head, err := s.Head(t.Context(), "prod/api")
		if err != nil || head.Size != store.MaxReleaseBytes {
			t.Errorf("head: size %d (%v), want %d: what admits renders by size must not underestimate it", head.Size, err, store.MaxReleaseBytes)
		}
		if _, got, err := s.Read(t.Context(), store.Ref{App: "prod/api"}); err != nil || !bytes.Equal(got, data) {
			t.Errorf("read: %v", err)
		}
	})
}

// A gzip object is transcoded by GCS, unchecked, and a damaged one made the
// client's reader reopen it in a loop until the deadline: it is refused
// from its attributes, before its bytes are asked for.
func TestReadRefusesGzipAtOnce(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	data := bigManifest("prod/api", 8<<10)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	damaged := bytes.Clone(gz.Bytes()[:gz.Len()*2/3])
	damaged[len(damaged)/2] ^= 0xff
	tb.PutEncoded(t, "prod/api/manifests.yaml", damaged, "gzip", map[string]string{"bucketops-digest": store.Digest(data), "bucketops-size": strconv.Itoa(len(data))})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	before := tb.Requests.Load()
	start := time.Now()
	_, _, err := s.Read(ctx, store.Ref{App: "prod/api"})
	took := time.Since(start)
	if !errors.Is(err, store.ErrCorrupt) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"gzip"`) {
		t.Errorf("read of a damaged gzip release: %v, want ErrCorrupt naming gzip", err)
	}
	if n := tb.Requests.Load() - before; n != 1 {
		t.Errorf("the read made %d requests (in %s), want 1: the attributes, never the bytes", n, took)
	}
	// From a listing too (verify --chain reads every release that way).
	hist, err := s.History(ctx, "prod/api", store.HistoryOptions{})
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %v", err)
	}
	before = tb.Requests.Load()
	if _, err := s.Bytes(ctx, hist[0]); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("bytes of the listed gzip release: %v, want ErrCorrupt", err)
	}
	if n := tb.Requests.Load() - before; n != 0 {
		t.Errorf("bytes of a listed gzip release made %d requests, want none", n)
	}
}

// An encoding changed in place (a metadata update keeps the generation)
// after the caller read the release's attributes is caught when the bytes
// are read, not decoded with the encoding the attributes said.
func TestBytesRefusesAnEncodingChangedInPlace(t *testing.T) {
	tb := storetest.New(t, true)
	s := tb.Store(t, "")
	data := bigManifest("prod/api", 8<<10)
	if _, err := s.Publish(t.Context(), "prod/api", store.Publication{Data: data, Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	head, err := s.Head(t.Context(), "prod/api")
	if err != nil {
		t.Fatal(err)
	}
	obj := tb.Client.Bucket(storetest.BucketName).Object("prod/api/" + store.ObjectName)
	if _, err := obj.Update(t.Context(), storage.ObjectAttrsToUpdate{ContentEncoding: "br"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Bytes(t.Context(), head)
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(fmt.Sprint(err), `served with Content-Encoding "br"`) {
		t.Errorf("bytes after the encoding changed in place: %v, want ErrCorrupt naming br", err)
	}
}
