package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"time"

	"cloud.google.com/go/storage"
)

// Publication is a release offered to Publish.
type Publication struct {
	// Data is the canonical stream; empty only for a tombstone.
	Data []byte
	// Sequence orders releases of one app (CI build number, commit time); 0
	// means none, and then no stale check is possible.
	Sequence  uint64
	Source    string
	Author    string
	Message   string
	Resources int
	// Origin is app@generation for a copy (promote, rollback).
	Origin string
	// Kind is KindRelease (the default) or KindTombstone.
	Kind string
	// IfGeneration, when not nil, is the strict mode: one attempt, written only
	// if the head is that generation (0: only if the app has no head);
	// anything else is ErrConflict.
	IfGeneration *int64
}

// Result is what Publish did.
type Result struct {
	Release
	// Unchanged is true when the head already held these bytes; nothing was written.
	Unchanged bool `json:"unchanged"`
	// Attempts counts the read-then-write rounds (1 when uncontended).
	Attempts int `json:"-"`
}

// Publish writes p as the new head of app unless the head already holds the
// same bytes. It reads the head's attributes, refuses a stale or conflicting
// release, and writes with a generation precondition; when another writer
// got there first (412) it reads again and retries, until ctx is done.
func (s *Store) Publish(ctx context.Context, app string, p Publication) (Result, error) {
	if err := ValidateApp(app); err != nil {
		return Result{}, err
	}
	if p.Kind == "" {
		p.Kind = KindRelease
	}
	if p.Kind != KindRelease && p.Kind != KindTombstone {
		return Result{}, fmt.Errorf("publish %s: unknown kind %q", app, p.Kind)
	}
	if p.Kind == KindRelease && len(p.Data) == 0 {
		return Result{}, fmt.Errorf("publish %s: an empty release would prune every object of the app; retire it instead", app)
	}
	digest := Digest(p.Data)
	checkedBucket := false
	for attempt := 1; ; attempt++ {
		head, err := s.Head(ctx, app)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Result{}, fmt.Errorf("publish %s: %w", app, err)
		}
		if !exists && !checkedBucket {
			// A first release: the one time worth a request to make sure
			// the bucket keeps history (and exists) before relying on it.
			if err := s.CheckBucket(ctx); err != nil {
				return Result{}, fmt.Errorf("publish %s: %w", app, err)
			}
			checkedBucket = true
		}
		if exists {
			if head.Digest == digest && head.Kind == p.Kind && (p.IfGeneration == nil || *p.IfGeneration == head.Generation) {
				return Result{Release: head, Unchanged: true, Attempts: attempt}, nil
			}
			if p.Sequence != 0 && head.Sequence > p.Sequence {
				return Result{}, fmt.Errorf("publish %s: %w: the head %s has sequence %d, higher than %d; a newer release is already published", app, ErrStale, head.Ref(), head.Sequence, p.Sequence)
			}
			if p.Sequence != 0 && head.Sequence == p.Sequence {
				return Result{}, fmt.Errorf("publish %s: %w: the head %s has the same sequence %d with other bytes (%s); give each release its own sequence", app, ErrConflict, head.Ref(), p.Sequence, head.Digest)
			}
		}
		cond := storage.Conditions{DoesNotExist: true}
		if p.IfGeneration != nil {
			if *p.IfGeneration != 0 {
				cond = storage.Conditions{GenerationMatch: *p.IfGeneration}
			}
		} else if exists {
			cond = storage.Conditions{GenerationMatch: head.Generation}
		}
		rel, err := s.write(ctx, app, cond, digest, p)
		switch {
		case err == nil:
			rel.Current = true
			return Result{Release: rel, Attempts: attempt}, nil
		case errors.Is(err, ErrConflict) && p.IfGeneration == nil:
			// Another writer won the race: read its head and decide again.
			s.log.Debug("head moved, retrying", "app", app, "attempt", attempt)
			if err := s.sleep(ctx, attempt); err != nil {
				return Result{}, fmt.Errorf("publish %s: gave up after %d attempts, the head kept moving: %w", app, attempt, err)
			}
		case errors.Is(err, ErrConflict):
			now := "it has no head"
			if exists {
				now = "the head is " + head.Ref().String()
			}
			return Result{}, fmt.Errorf("publish %s: %w: --if-generation %d, but %s", app, ErrConflict, *p.IfGeneration, now)
		default:
			return Result{}, fmt.Errorf("publish %s: %w", app, err)
		}
	}
}

// write uploads p in a single request under cond. The upload is atomic: GCS
// checks the CRC32C and makes the object visible only once complete.
func (s *Store) write(ctx context.Context, app string, cond storage.Conditions, digest string, p Publication) (Release, error) {
	w := s.object(app).If(cond).NewWriter(ctx)
	w.ChunkSize = 0 // one multipart request, no resumable session
	w.ContentType = ContentType
	w.CRC32C = crc32.Checksum(p.Data, crc32.MakeTable(crc32.Castagnoli))
	w.SendCRC32C = true
	w.Metadata = map[string]string{metaDigest: digest, metaKind: p.Kind}
	set := func(k, v string) {
		if v != "" {
			w.Metadata[k] = v
		}
	}
	if p.Sequence != 0 {
		set(metaSequence, strconv.FormatUint(p.Sequence, 10))
	}
	set(metaSource, p.Source)
	set(metaAuthor, p.Author)
	set(metaMessage, p.Message)
	set(metaResources, strconv.Itoa(p.Resources))
	set(metaOrigin, p.Origin)
	if _, err := w.Write(p.Data); err != nil {
		w.CloseWithError(err)
		return Release{}, s.translate(ctx, err)
	}
	// Close is where the upload happens and where a 412 arrives.
	if err := w.Close(); err != nil {
		return Release{}, s.translate(ctx, err)
	}
	return s.release(app, w.Attrs(), true), nil
}

// sleep waits before another attempt at a contended write: a short,
// jittered, growing pause, so writers racing for one app spread out.
func (s *Store) sleep(ctx context.Context, attempt int) error {
	d := s.backoff.Initial / 4
	for i := 1; i < attempt && d < s.backoff.Max; i++ {
		d *= 2
	}
	d = min(d, s.backoff.Max)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Copy publishes the bytes of src as the new head of dst, recording
// src@generation as bucketops-origin: promote and rollback. The source's
// digest is checked first, so a corrupt release is never copied. p carries
// the new release's own author, message and sequence; Data, Resources and
// Origin are taken from the source, and Source too when p leaves it empty.
func (s *Store) Copy(ctx context.Context, src Ref, dst string, p Publication) (Result, error) {
	if err := ValidateApp(dst); err != nil {
		return Result{}, err
	}
	rel, data, err := s.Read(ctx, src)
	if err != nil {
		return Result{}, err
	}
	if rel.Kind != KindRelease {
		return Result{}, fmt.Errorf("copy %s: %w: it is a %s, not a release", rel.Ref(), ErrConflict, rel.Kind)
	}
	p.Data = data
	p.Resources = rel.Resources
	p.Origin = rel.Ref().String()
	p.Kind = KindRelease
	if p.Source == "" {
		p.Source = rel.Source
	}
	return s.Publish(ctx, dst, p)
}

// Retire publishes a tombstone: a deliberately empty release after which the
// bridge renders nothing and Argo CD prunes the app's objects.
func (s *Store) Retire(ctx context.Context, app string, p Publication) (Result, error) {
	p.Data = nil
	p.Resources = 0
	p.Kind = KindTombstone
	return s.Publish(ctx, app, p)
}
