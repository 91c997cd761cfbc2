// Package storetest runs an in-process GCS emulator for tests: the real
// storage client talks to fake-gcs-server over loopback HTTP, through a
// handler that counts requests, can answer some of them itself, and checks
// the generation preconditions of server-side copies, which
// fake-gcs-server ignores.
package storetest

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/store"
)

// BucketName is the bucket every Bucket creates.
const BucketName = "releases"

// Bucket is a versioned (or not) bucket in an emulator stopped with the test.
type Bucket struct {
	Server *fakestorage.Server
	Client *storage.Client
	// URL is the emulator's address, as STORAGE_EMULATOR_HOST wants it without the scheme.
	URL string
	// Requests counts every HTTP request the emulator received.
	Requests  atomic.Int64
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
}

// copyPath is a rewrite (server-side copy) request: the destination is
// its last bucket and object.
var copyPath = regexp.MustCompile(`/b/[^/]+/o/.+/(?:rewriteTo|copyTo)/b/([^/]+)/o/(.+)$`)

// enforceCopyPreconditions answers 412 to a copy whose ifGenerationMatch
// doesn't match its destination's live generation, as GCS does:
// fake-gcs-server checks generation preconditions on uploads only, so
// without this a promote or rollback racing another writer would pass
// here and fail there.
func (b *Bucket) enforceCopyPreconditions(w http.ResponseWriter, r *http.Request) bool {
	m := copyPath.FindStringSubmatch(r.URL.EscapedPath())
	want := r.URL.Query().Get("ifGenerationMatch")
	if m == nil || want == "" || r.Method != http.MethodPost {
		return false
	}
	name, err := url.PathUnescape(m[2])
	if err != nil {
		return false
	}
	current := "0"
	if obj, err := b.Server.GetObject(m[1], name); err == nil {
		current = strconv.FormatInt(obj.Generation, 10)
	}
	if current == want {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusPreconditionFailed)
	fmt.Fprintf(w, `{"error":{"code":412,"message":"At least one of the pre-conditions you specified did not hold (generation %s, ifGenerationMatch %s)"}}`, current, want)
	return true
}

// New starts an emulator holding BucketName.
func New(t testing.TB, versioned bool) *Bucket {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: BucketName, VersioningEnabled: versioned})
	b := &Bucket{Server: srv}
	handler := srv.HTTPHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.Requests.Add(1)
		if f := b.intercept.Load(); f != nil && (*f)(w, r) {
			return
		}
		if b.enforceCopyPreconditions(w, r) {
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	b.URL = hs.URL
	client, err := storage.NewClient(t.Context(),
		option.WithEndpoint(hs.URL+"/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	b.Client = client
	return b
}

// Store returns a store on the bucket with a short back-off.
func (b *Bucket) Store(t testing.TB, prefix string) *store.Store {
	t.Helper()
	return store.New(b.Client, store.Location{Bucket: BucketName, Prefix: prefix}, slog.New(slog.DiscardHandler),
		store.WithBackoff(gax.Backoff{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2}))
}

// Intercept lets f answer requests before the emulator; f returns true when
// it did. nil restores the emulator.
func (b *Bucket) Intercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	if f == nil {
		b.intercept.Store(nil)
		return
	}
	b.intercept.Store(&f)
}

// Put writes an object behind bucketops' back, with the metadata given: a
// tool that ignores the contract, or someone tampering with a release.
func (b *Bucket) Put(t testing.TB, name string, data []byte, metadata map[string]string) {
	t.Helper()
	w := b.Client.Bucket(BucketName).Object(name).NewWriter(t.Context())
	w.Metadata = metadata
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// PutEncoded is Put of bytes stored with a Content-Encoding: a release
// from a tool that compresses its own way, or a damaged compressed one.
func (b *Bucket) PutEncoded(t testing.TB, name string, data []byte, encoding string, metadata map[string]string) {
	t.Helper()
	w := b.Client.Bucket(BucketName).Object(name).NewWriter(t.Context())
	w.ContentEncoding = encoding
	w.Metadata = metadata
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// What someone with write access to the bucket can do behind bucketops'
// back, through the GCS API: each makes a new generation or changes one,
// as a tampering test needs.

// Attrs returns the attributes of object name's generation gen (0: live).
func (b *Bucket) Attrs(t testing.TB, name string, gen int64) *storage.ObjectAttrs {
	t.Helper()
	obj := b.Client.Bucket(BucketName).Object(name)
	if gen != 0 {
		obj = obj.Generation(gen)
	}
	attrs, err := obj.Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

// Rewrite publishes data as a new generation of name carrying the live
// generation's metadata unchanged.
func (b *Bucket) Rewrite(t testing.TB, name string, data []byte) {
	t.Helper()
	b.Put(t, name, data, b.Attrs(t, name, 0).Metadata)
}

// EditMetadata sets one metadata key of name's live generation in place
// (its generation stays, its metageneration grows).
func (b *Bucket) EditMetadata(t testing.TB, name, key, value string) {
	t.Helper()
	if _, err := b.Client.Bucket(BucketName).Object(name).Update(t.Context(), storage.ObjectAttrsToUpdate{Metadata: map[string]string{key: value}}); err != nil {
		t.Fatal(err)
	}
}

// DeleteGeneration deletes one generation of name for good.
func (b *Bucket) DeleteGeneration(t testing.TB, name string, gen int64) {
	t.Helper()
	if err := b.Client.Bucket(BucketName).Object(name).Generation(gen).Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// CopyObject copies generation gen of from (0: live) over to, bytes and
// metadata, as a new generation: an old release replayed, or one app's
// release planted in another.
func (b *Bucket) CopyObject(t testing.TB, from string, gen int64, to string) *storage.ObjectAttrs {
	t.Helper()
	src := b.Client.Bucket(BucketName).Object(from)
	if gen != 0 {
		src = src.Generation(gen)
	}
	attrs, err := b.Client.Bucket(BucketName).Object(to).CopierFrom(src).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}
