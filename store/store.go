// Package store owns releases on a versioned Google Cloud Storage bucket.
//
// An app's releases are the generations of one object,
// [PREFIX/]<app>/manifests.yaml, and the generation number is the release id.
// The contract that matters: Publish never loses an update and never lets an
// older writer overwrite a newer one. Every write carries a generation
// precondition, so any number of concurrent writers converge, and an
// uncontended publish costs two requests (read the head's attributes, write)
// however long the history is.
//
// Errors from the SDK are translated here, once, into ErrNotFound,
// ErrConflict, ErrStale, ErrCorrupt and ErrBucket.
package store

import (
	"cmp"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrNotFound: the app, or the generation asked for, doesn't exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the head moved under a strict write, or another release
	// claims the same sequence with other bytes.
	ErrConflict = errors.New("conflict")
	// ErrStale: the head carries a higher sequence than the release offered.
	ErrStale = errors.New("stale")
	// ErrCorrupt: the stored bytes are not a release bucketops wrote: they
	// don't match their bucketops-digest, they are stored with a
	// Content-Encoding bucketops doesn't write (anything but zstd or none),
	// their zstd stream is damaged or inflates past MaxReleaseBytes, or
	// they don't come to the length their bucketops-size records.
	ErrCorrupt = errors.New("digest mismatch")
	// ErrBucket: the bucket is missing or doesn't keep noncurrent versions.
	ErrBucket = errors.New("bucket unusable")
	// ErrAccess: the credentials may not do what was asked.
	ErrAccess = errors.New("access denied")
	// ErrInvalidLocation: a bucket URL that isn't gs://BUCKET[/PREFIX].
	ErrInvalidLocation = errors.New("invalid bucket")
	// ErrTooLarge: a release over MaxReleaseBytes.
	ErrTooLarge = errors.New("release too large")
	// ErrInvalidRetention: an Object Retention GCS can't set: not in the
	// future, an unknown mode, or a bucket without object retention.
	ErrInvalidRetention = errors.New("invalid retention")
)

// ObjectName is the name of the object holding an app's releases, below the prefix.
const ObjectName = "manifests.yaml"

// MaxReleaseBytes is the largest release Publish writes and Read loads
// into memory, uncompressed, the same limit as render.MaxReleaseBytes:
// anything bigger wasn't written by bucketops.
const MaxReleaseBytes = 10 << 20

// ContentType of every release object.
const ContentType = "application/yaml"

// Release kinds.
const (
	KindRelease   = "release"
	KindTombstone = "tombstone"
)

// Custom metadata keys (x-goog-meta-…).
const (
	metaDigest    = "bucketops-digest"
	metaSequence  = "bucketops-sequence"
	metaSource    = "bucketops-source"
	metaAuthor    = "bucketops-author"
	metaMessage   = "bucketops-message"
	metaResources = "bucketops-resources"
	metaOrigin    = "bucketops-origin"
	metaKind      = "bucketops-kind"
	metaPublishID = "bucketops-publish-id"
	metaSignature = "bucketops-signature"
	metaLabels    = "bucketops-labels"
	metaSize      = "bucketops-size"
	metaFormat    = "bucketops-format"
)

// Format is the release format a publish records in bucketops-format: the
// version of what readers may derive from a release's metadata, so that a
// reader whose output must never change for a release already published
// (the git view's commits, whose SHAs Argo CD records) can tell old
// releases from new ones by the bucket alone. Releases from before it was
// recorded have none (Release.Format 0). Format 2: the git view's commit
// carries the release's source in trailers (package gitview).
const Format = 2

// Release describes one generation of an app's object, from its attributes.
type Release struct {
	App        string    `json:"app"`
	Generation int64     `json:"generation"`
	Time       time.Time `json:"time"`
	Sequence   uint64    `json:"sequence"`
	Source     string    `json:"source"`
	Author     string    `json:"author"`
	Message    string    `json:"message"`
	Digest     string    `json:"digest"`
	Resources  int       `json:"resources"`
	Origin     string    `json:"origin"`
	// Labels are set at publish time (push --label) for ApplicationSet
	// templates to route the app.
	Labels map[string]string `json:"labels,omitempty"`
	Kind   string            `json:"kind"`
	// Size is the release's length uncompressed, the stream the digest is
	// over: its bucketops-size, or for a release from before compression
	// the object's size. A compressed release that doesn't record it
	// counts as MaxReleaseBytes, so that what admits renders by size never
	// underestimates one.
	Size int64 `json:"size"`
	// StoredSize is the object's size in the bucket, compressed.
	StoredSize int64 `json:"stored_size"`
	// Encoding is the object's Content-Encoding: EncodingZstd, or empty
	// for a release stored uncompressed (published before compression).
	Encoding string `json:"encoding"`
	// PublishID is the random id of the publish that wrote the release:
	// how a writer recognises its own write after an error hid it.
	PublishID string `json:"publish_id,omitempty"`
	// Signature is the release's signed statement (a DSSE envelope, see
	// package provenance), empty for an unsigned release.
	Signature string `json:"-"`
	// Current is true for the head, false for a noncurrent generation.
	Current bool `json:"current"`
	// Format is the release's bucketops-format (Format when published by
	// this version), 0 for a release from before it was recorded or one
	// whose value isn't a positive number.
	Format int `json:"format,omitempty"`
	// RetainUntil and RetentionMode are the generation's Object
	// Retention, when it has one: it can't be deleted before then.
	RetainUntil   time.Time `json:"retain_until,omitzero"`
	RetentionMode string    `json:"retention_mode,omitempty"`

	// sizeRecorded: Size is the release's bucketops-size, which Bytes
	// checks the decompressed stream against.
	sizeRecorded bool
}

// Ref returns app@generation.
func (r Release) Ref() Ref { return Ref{App: r.App, Generation: r.Generation} }

// Location is a bucket and an optional prefix inside it.
type Location struct {
	Bucket string
	Prefix string
}

// ParseLocation parses gs://BUCKET[/PREFIX].
func ParseLocation(s string) (Location, error) {
	rest, ok := strings.CutPrefix(s, "gs://")
	if !ok {
		return Location{}, fmt.Errorf("%w %q: it must look like gs://BUCKET or gs://BUCKET/PREFIX", ErrInvalidLocation, s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("%w %q: no bucket name; use gs://BUCKET", ErrInvalidLocation, s)
	}
	if err := validatePath(prefix); prefix != "" && err != nil {
		return Location{}, fmt.Errorf("%w %q: the prefix %s", ErrInvalidLocation, s, err)
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

func (l Location) String() string {
	if l.Prefix == "" {
		return "gs://" + l.Bucket
	}
	return "gs://" + l.Bucket + "/" + l.Prefix
}

// Store reads and writes releases in one Location.
type Store struct {
	client  *storage.Client
	bucket  *storage.BucketHandle
	loc     Location
	log     *slog.Logger
	backoff gax.Backoff
	retries atomic.Int64
	// onRetry hears every retried error; failFast refuses to retry a
	// refused connection.
	onRetry  func(error)
	failFast bool
}

// Option configures optional behaviour of a Store, mostly for tests.
type Option func(*Store)

// WithBackoff sets the back-off used on 429/503 and on contended writes.
func WithBackoff(b gax.Backoff) Option { return func(s *Store) { s.backoff = b } }

// WithRetryNotice calls fn with each error a request is retried on, so a
// command line can say what it is waiting for.
func WithRetryNotice(fn func(error)) Option { return func(s *Store) { s.onRetry = fn } }

// FailFastOnRefused gives up at once when nothing listens where GCS (or
// the emulator) should be, rather than retrying until the deadline: what
// a person at a terminal wants; a server keeps retrying.
func FailFastOnRefused() Option { return func(s *Store) { s.failFast = true } }

// shouldRetry is the retry decision of every request: GCS's own
// (429, 5xx, network errors), counted and reported.
func (s *Store) shouldRetry(err error) bool {
	if s.failFast && errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	retry := storage.ShouldRetry(err)
	if retry {
		s.retries.Add(1)
		s.log.Debug("retrying GCS request", "error", err)
		if s.onRetry != nil {
			s.onRetry(err)
		}
	}
	return retry
}

// New returns a Store for loc through client. The logger must not be nil.
func New(client *storage.Client, loc Location, log *slog.Logger, opts ...Option) *Store {
	s := &Store{
		client:  client,
		loc:     loc,
		log:     log,
		backoff: gax.Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2},
	}
	for _, o := range opts {
		o(s)
	}
	// Listings retry as the object calls do.
	s.bucket = client.Bucket(loc.Bucket).Retryer(storage.WithBackoff(s.backoff), storage.WithErrorFunc(s.shouldRetry))
	return s
}

// Client is the GCS client the store reads and writes through, for what
// keeps objects of its own beside the releases (package floor).
func (s *Store) Client() *storage.Client { return s.client }

// Location returns where the store keeps its releases.
func (s *Store) Location() Location { return s.loc }

// Retries returns how many requests were retried after a 429, 5xx or network error.
func (s *Store) Retries() int64 { return s.retries.Load() }

func (s *Store) objectName(app string) string {
	if s.loc.Prefix == "" {
		return app + "/" + ObjectName
	}
	return s.loc.Prefix + "/" + app + "/" + ObjectName
}

// App returns the app whose release object is name, or false for an object
// that isn't a release object under the location's prefix.
func (l Location) App(name string) (string, bool) {
	rest := name
	if l.Prefix != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(name, l.Prefix+"/"); !ok {
			return "", false
		}
	}
	app, ok := strings.CutSuffix(rest, "/"+ObjectName)
	if !ok || ValidateApp(app) != nil {
		return "", false
	}
	return app, true
}

// object returns a handle whose idempotent calls back off with jitter on
// 429, 5xx and network errors, counting each retry.
func (s *Store) object(app string) *storage.ObjectHandle {
	return s.bucket.Object(s.objectName(app)).Retryer(
		storage.WithBackoff(s.backoff),
		storage.WithPolicy(storage.RetryIdempotent),
		storage.WithErrorFunc(s.shouldRetry),
	)
}

// Head returns the current release of app.
func (s *Store) Head(ctx context.Context, app string) (Release, error) {
	if err := ValidateApp(app); err != nil {
		return Release{}, err
	}
	attrs, err := s.object(app).Attrs(ctx)
	if err != nil {
		return Release{}, fmt.Errorf("head of %s: %w", app, s.translate(ctx, err))
	}
	return s.release(app, attrs, true), nil
}

// Stat returns the release ref names (the head when its generation is 0)
// from its attributes, without its bytes.
func (s *Store) Stat(ctx context.Context, ref Ref) (Release, error) {
	if ref.Generation == 0 {
		return s.Head(ctx, ref.App)
	}
	if err := ValidateApp(ref.App); err != nil {
		return Release{}, err
	}
	attrs, err := s.object(ref.App).Generation(ref.Generation).Attrs(ctx)
	if err != nil {
		return Release{}, fmt.Errorf("read %s: %w", ref, s.translate(ctx, err))
	}
	return s.release(ref.App, attrs, attrs.Deleted.IsZero()), nil
}

// Read returns the release ref names (the head when its generation is 0)
// and its bytes, decompressed, after checking them against the recorded
// digest.
func (s *Store) Read(ctx context.Context, ref Ref) (Release, []byte, error) {
	if err := ValidateApp(ref.App); err != nil {
		return Release{}, nil, err
	}
	// Attributes first, then the bytes of exactly that generation: reading
	// the head twice could pair one release's bytes with another's digest.
	obj := s.object(ref.App)
	if ref.Generation != 0 {
		obj = obj.Generation(ref.Generation)
	}
	attrs, err := obj.Attrs(ctx)
	if err != nil {
		return Release{}, nil, fmt.Errorf("read %s: %w", ref, s.translate(ctx, err))
	}
	rel := s.release(ref.App, attrs, attrs.Deleted.IsZero())
	data, err := s.Bytes(ctx, rel)
	if err != nil {
		return rel, nil, err
	}
	// Exact now, also for a compressed release that didn't record it.
	rel.Size = int64(len(data))
	return rel, data, nil
}

// Bytes reads the bytes of rel, a release whose attributes the caller
// already holds (Head, Stat, History), decompresses them and checks the
// stream against its digest and recorded size: one request. An encoding
// bucketops doesn't write is refused from rel alone, before any request.
func (s *Store) Bytes(ctx context.Context, rel Release) ([]byte, error) {
	if err := checkEncoding(rel); err != nil {
		return nil, fmt.Errorf("read %s: %w", rel.Ref(), err)
	}
	r, err := s.object(rel.App).Generation(rel.Generation).NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel.Ref(), s.translate(ctx, err))
	}
	defer r.Close()
	// The encoding may have been changed in place (a metadata update keeps
	// the generation) since rel's attributes were read: decoding with the
	// wrong one would only fail later, or not at all for gzip.
	if enc := r.Attrs.ContentEncoding; enc != "" && enc != rel.Encoding {
		return nil, fmt.Errorf("read %s: %w: the object is served with Content-Encoding %q, its attributes said %q; it was changed behind bucketops' back, publish it again", rel.Ref(), ErrCorrupt, enc, rel.Encoding)
	}
	limit := int64(MaxReleaseBytes)
	if rel.Encoding != "" {
		limit = maxStoredBytes
	}
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel.Ref(), s.translate(ctx, err))
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("read %s: %w: the object is larger than %d bytes, no release is", rel.Ref(), ErrCorrupt, limit)
	}
	data, err := decompress(raw, rel.Encoding)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel.Ref(), err)
	}
	if got := Digest(data); got != rel.Digest {
		return nil, fmt.Errorf("read %s: %w: the object holds %s but its %s says %q; it was written behind bucketops' back, publish it again", rel.Ref(), ErrCorrupt, got, metaDigest, rel.Digest)
	}
	if rel.sizeRecorded && int64(len(data)) != rel.Size {
		return nil, fmt.Errorf("read %s: %w: the object holds %d bytes but its %s says %d; it was changed behind bucketops' back, publish it again", rel.Ref(), ErrCorrupt, len(data), metaSize, rel.Size)
	}
	return data, nil
}

// HistoryOptions pages through an app's history, newest first.
type HistoryOptions struct {
	// Limit caps the number of releases returned; 0 means all.
	Limit int
	// Before returns only generations lower than this one (the previous
	// page's last generation); 0 starts at the head.
	Before int64
	// Listed, when not nil, hears how many versions the listing has given
	// so far, every 1,000 (a long history is one request per 1,000).
	Listed func(n int)
}

// History returns app's releases, newest first, including noncurrent
// generations, the head and a deleted head's history.
//
// GCS lists an object's versions oldest first and can't list them the
// other way round, so a page of the newest releases costs one listing
// request per 1,000 versions of the app; what History keeps in memory is
// bounded by the page, and the first page of one release is the head's
// attributes alone (one request).
func (s *Store) History(ctx context.Context, app string, opts HistoryOptions) ([]Release, error) {
	if err := ValidateApp(app); err != nil {
		return nil, err
	}
	if opts.Limit == 1 && opts.Before == 0 {
		head, err := s.Head(ctx, app)
		if err == nil {
			return []Release{head}, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("history of %s: %w", app, err)
		}
		// A deleted head may leave noncurrent generations: list them.
	}
	page := &newest{limit: opts.Limit}
	seen := false
	n := 0
	err := s.versions(ctx, app, func(r Release) bool {
		seen = true
		if n++; opts.Listed != nil && n%1000 == 0 {
			opts.Listed(n)
		}
		if opts.Before == 0 || r.Generation < opts.Before {
			page.add(r)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		return nil, fmt.Errorf("history of %s: %w: no release was ever published to %s/%s", app, ErrNotFound, s.loc.Bucket, s.objectName(app))
	}
	return page.sorted(), nil
}

// HeadAt returns the release that was the head at t among releases given
// newest first: the newest one written at or before t. A release is the
// head from its generation's creation until the next one's.
func HeadAt(newestFirst []Release, t time.Time) (Release, bool) {
	for _, r := range newestFirst {
		if !r.Time.After(t) {
			return r, true
		}
	}
	return Release{}, false
}

// versions calls fn with each generation of app's object, as GCS lists
// them, until fn returns false.
func (s *Store) versions(ctx context.Context, app string, fn func(Release) bool) error {
	name := s.objectName(app)
	q := &storage.Query{Prefix: name, Versions: true}
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Created", "Deleted", "Size", "ContentEncoding", "Metadata"}); err != nil {
		return err
	}
	it := s.bucket.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("history of %s: %w", app, s.translate(ctx, err))
		}
		if attrs.Name != name {
			continue
		}
		if !fn(s.release(app, attrs, attrs.Deleted.IsZero())) {
			return nil
		}
	}
}

// newest keeps the limit releases of highest generation it is given (all
// of them when limit is 0), in a min-heap on generation.
type newest struct {
	limit int
	rs    []Release
}

func (n *newest) Len() int           { return len(n.rs) }
func (n *newest) Less(i, j int) bool { return n.rs[i].Generation < n.rs[j].Generation }
func (n *newest) Swap(i, j int)      { n.rs[i], n.rs[j] = n.rs[j], n.rs[i] }
func (n *newest) Push(x any)         { n.rs = append(n.rs, x.(Release)) }
func (n *newest) Pop() any {
	last := n.rs[len(n.rs)-1]
	n.rs = n.rs[:len(n.rs)-1]
	return last
}

func (n *newest) add(r Release) {
	switch {
	case n.limit <= 0 || len(n.rs) < n.limit:
		heap.Push(n, r)
	case r.Generation > n.rs[0].Generation:
		n.rs[0] = r
		heap.Fix(n, 0)
	}
}

// sorted returns the releases kept, newest first.
func (n *newest) sorted() []Release {
	slices.SortFunc(n.rs, func(a, b Release) int { return cmp.Compare(b.Generation, a.Generation) })
	return n.rs
}

// List returns the head release of every app under prefix (a path of whole
// segments, or empty for all), in the bucket's order of object names.
func (s *Store) List(ctx context.Context, prefix string) ([]Release, error) {
	heads, _, err := s.ListPage(ctx, prefix, ListOptions{})
	return heads, err
}

// Ping checks that the bucket answers, with the permission the bridge needs
// anyway (listing objects), in one request.
func (s *Store) Ping(ctx context.Context) error {
	q := &storage.Query{Prefix: s.loc.Prefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return err
	}
	it := s.bucket.Objects(ctx, q)
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && !errors.Is(err, iterator.Done) {
		return fmt.Errorf("bucket %s: %w", s.loc.Bucket, s.translate(ctx, err))
	}
	return nil
}

// CheckBucket reports ErrBucket when the bucket doesn't exist or doesn't keep
// noncurrent versions. Credentials that may not read the bucket's settings
// (storage.buckets.get) are not an error: the check is then skipped.
func (s *Store) CheckBucket(ctx context.Context) error {
	attrs, err := s.bucket.Attrs(ctx)
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w: bucket %s does not exist; create it with: gcloud storage buckets create gs://%s --versioning", ErrBucket, s.loc.Bucket, s.loc.Bucket)
	case HTTPStatus(err) == http.StatusForbidden || HTTPStatus(err) == http.StatusUnauthorized:
		s.log.Debug("cannot read bucket settings, skipping the versioning check", "bucket", s.loc.Bucket, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("bucket %s: %w", s.loc.Bucket, s.translate(ctx, err))
	case !attrs.VersioningEnabled:
		return fmt.Errorf("%w: bucket %s does not have Object Versioning on, so every publish would destroy the release before it; turn it on with: gcloud storage buckets update gs://%s --versioning", ErrBucket, s.loc.Bucket, s.loc.Bucket)
	}
	return nil
}

func (s *Store) release(app string, attrs *storage.ObjectAttrs, current bool) Release {
	m := attrs.Metadata
	r := Release{
		App:        app,
		Generation: attrs.Generation,
		Time:       attrs.Created,
		Source:     m[metaSource],
		Author:     m[metaAuthor],
		Message:    m[metaMessage],
		Digest:     m[metaDigest],
		Origin:     m[metaOrigin],
		Labels:     ParseLabels(m[metaLabels]),
		Kind:       m[metaKind],
		Size:       attrs.Size,
		StoredSize: attrs.Size,
		Encoding:   attrs.ContentEncoding,
		PublishID:  m[metaPublishID],
		Signature:  m[metaSignature],
		Current:    current,
	}
	if r.Kind == "" {
		r.Kind = KindRelease
	}
	if ret := attrs.Retention; ret != nil {
		r.RetainUntil, r.RetentionMode = ret.RetainUntil, ret.Mode
	}
	// Metadata written by something else than bucketops may be garbage;
	// show it as absent rather than failing the whole listing.
	if v, err := strconv.ParseUint(m[metaSequence], 10, 64); err == nil {
		r.Sequence = v
	}
	if v, err := strconv.Atoi(m[metaResources]); err == nil {
		r.Resources = v
	}
	if v, err := strconv.Atoi(m[metaFormat]); err == nil && v > 0 {
		r.Format = v
	}
	if v, err := strconv.ParseInt(m[metaSize], 10, 64); err == nil && v >= 0 {
		r.Size, r.sizeRecorded = v, true
	} else if r.Encoding != "" {
		r.Size = MaxReleaseBytes
	}
	return r
}

// translate maps SDK errors to the package's sentinels, once.
func (s *Store) translate(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("%w in %s", ErrNotFound, s.loc)
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w: bucket %s does not exist", ErrBucket, s.loc.Bucket)
	case HTTPStatus(err) == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: the head changed: %w", ErrConflict, err)
	case HTTPStatus(err) == http.StatusNotFound:
		return fmt.Errorf("%w in %s: %w", ErrNotFound, s.loc, err)
	case HTTPStatus(err) == http.StatusForbidden || HTTPStatus(err) == http.StatusUnauthorized:
		return fmt.Errorf("%w to %s; check the credentials (GOOGLE_APPLICATION_CREDENTIALS) and their roles on the bucket: %w", ErrAccess, s.loc, err)
	case ctx.Err() != nil:
		return fmt.Errorf("gave up: %w (last error: %w)", ctx.Err(), err)
	}
	return err
}

// HTTPStatus is the HTTP status of a GCS error, 0 for any other error.
func HTTPStatus(err error) int {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return gerr.Code
	}
	return 0
}

// Digest returns "sha256:<hex>" of data, the form of bucketops-digest.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
