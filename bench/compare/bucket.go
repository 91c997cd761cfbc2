package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/store"
)

const benchBucket = "releases"

// bucketContender publishes through the real store package and GCS client
// to an in-process fake-gcs-server over loopback HTTP, with the store's
// shipped back-off.
type bucketContender struct{}

type bucketTarget struct {
	server   *fakestorage.Server
	http     *httptest.Server
	client   *storage.Client
	store    *store.Store
	requests atomic.Int64
	rejected atomic.Int64 // 412 answers: writes that lost the race for the precondition
}

// statusRecorder remembers the status of a response.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Open starts an emulator with a versioned bucket and writes the prior
// releases straight into it, as generations with bucketops' metadata: setup,
// not measured.
func (bucketContender) Open(ctx context.Context, apps []string, history int, size int) (target, error) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, Writer: io.Discard})
	if err != nil {
		return nil, fmt.Errorf("start the emulator: %w", err)
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: benchBucket, VersioningEnabled: true})
	t := &bucketTarget{server: srv}
	handler := srv.HTTPHandler()
	t.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.requests.Add(1)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		handler.ServeHTTP(rec, r)
		if rec.status == http.StatusPreconditionFailed {
			t.rejected.Add(1)
		}
	}))
	t.client, err = storage.NewClient(ctx,
		option.WithEndpoint(t.http.URL+"/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("storage client: %w", err)
	}
	t.store = store.New(t.client, store.Location{Bucket: benchBucket}, slog.New(slog.DiscardHandler))
	for i, p := range priors(apps, history) {
		data := manifest(p.App, p.Seq, size)
		srv.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{
				BucketName:  benchBucket,
				Name:        p.App + "/" + store.ObjectName,
				Generation:  int64(i + 1),
				ContentType: store.ContentType,
				Metadata: map[string]string{
					"bucketops-digest":   store.Digest(data),
					"bucketops-sequence": strconv.FormatUint(p.Seq, 10),
					"bucketops-kind":     store.KindRelease,
				},
			},
			Content: data,
		})
	}
	return t, nil
}

// Requests returns how many HTTP requests the emulator has received.
func (t *bucketTarget) Requests() int64 { return t.requests.Load() }

// Rejections returns how many writes the emulator refused with 412. They
// are counted here rather than from Result.Attempts because a publish that
// lost the race and then found a newer head returns ErrStale, not a Result.
func (t *bucketTarget) Rejections() int64 { return t.rejected.Load() }

// Writer returns a publisher sharing the target's client, as the pipelines
// of one CI system share nothing but the bucket.
func (t *bucketTarget) Writer(context.Context) (writer, error) {
	return bucketWriter{t.store}, nil
}

// State reads the head's bytes with the bare client, not through store, so
// that the check doesn't trust the code it checks.
func (t *bucketTarget) State(ctx context.Context, app string) ([]byte, int, error) {
	obj := t.client.Bucket(benchBucket).Object(app + "/" + store.ObjectName)
	r, err := obj.NewReader(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("read the head of %s: %w", app, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, fmt.Errorf("read the head of %s: %w", app, err)
	}
	switch enc := r.Attrs.ContentEncoding; enc {
	case "":
	case "zstd":
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil, 0, err
		}
		data, err = d.DecodeAll(data, nil)
		d.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("read the head of %s: %w", app, err)
		}
	default:
		return nil, 0, fmt.Errorf("read the head of %s: Content-Encoding %q, which store never writes", app, enc)
	}
	n := 0
	err = t.versions(ctx, app, func(*storage.ObjectAttrs) { n++ })
	return data, n, err
}

// Size sums the sizes of every generation in the bucket, as stored
// (compressed): what GCS bills.
func (t *bucketTarget) Size(ctx context.Context) (int64, int64, error) {
	var total int64
	err := t.versions(ctx, "", func(a *storage.ObjectAttrs) { total += a.Size })
	return total, total, err
}

func (t *bucketTarget) versions(ctx context.Context, app string, f func(*storage.ObjectAttrs)) error {
	q := &storage.Query{Versions: true}
	if app != "" {
		q.Prefix = app + "/" + store.ObjectName
	}
	it := t.client.Bucket(benchBucket).Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list versions: %w", err)
		}
		if app == "" || attrs.Name == q.Prefix {
			f(attrs)
		}
	}
}

func (t *bucketTarget) Close() error {
	var err error
	if t.client != nil {
		err = t.client.Close()
	}
	t.http.Close()
	t.server.Stop()
	return err
}

type bucketWriter struct{ s *store.Store }

func (w bucketWriter) Publish(ctx context.Context, app string, seq uint64, data []byte) (outcome, error) {
	res, err := w.s.Publish(ctx, app, store.Publication{
		Data:      data,
		Sequence:  seq,
		Author:    "ci@example.com",
		Source:    "build-" + strconv.FormatUint(seq, 10),
		Message:   "release " + strconv.FormatUint(seq, 10),
		Resources: 2,
	})
	switch {
	case errors.Is(err, store.ErrStale):
		return outcome{Dropped: true}, nil
	case err != nil:
		return outcome{}, err
	case res.Unchanged:
		return outcome{}, fmt.Errorf("publish %s: sequence %d unchanged: the benchmark's releases all differ", app, seq)
	}
	return outcome{Retries: res.Attempts - 1}, nil
}

func (bucketWriter) Close() error { return nil }
