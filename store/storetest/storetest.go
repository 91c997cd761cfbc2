// Package storetest runs an in-process GCS emulator for tests: the real
// storage client talks to fake-gcs-server over loopback HTTP, through a
// handler that counts requests and can answer some of them itself.
package storetest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
