package store_test

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

// testBucket is an in-process GCS emulator reached by the real client over
// loopback HTTP, with a hook in front of it to count requests and to answer
// some of them itself (429s).
type testBucket struct {
	server   *fakestorage.Server
	client   *storage.Client
	requests atomic.Int64
	// intercept, when set, may answer a request instead of the emulator.
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
}

const bucketName = "releases"

func newTestBucket(t testing.TB, versioned bool) *testBucket {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucketName, VersioningEnabled: versioned})
	tb := &testBucket{server: srv}
	handler := srv.HTTPHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tb.requests.Add(1)
		if f := tb.intercept.Load(); f != nil && (*f)(w, r) {
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	client, err := storage.NewClient(t.Context(),
		option.WithEndpoint(hs.URL+"/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	tb.client = client
	return tb
}

func (tb *testBucket) store(t testing.TB, prefix string) *store.Store {
	t.Helper()
	return store.New(tb.client, store.Location{Bucket: bucketName, Prefix: prefix}, slog.New(slog.DiscardHandler),
		store.WithBackoff(gax.Backoff{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2}))
}

func (tb *testBucket) setIntercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	tb.intercept.Store(&f)
}
