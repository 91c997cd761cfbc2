package store

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/http"
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
	// Labels route the app in ApplicationSet templates (ValidateLabels).
	// A copy keeps its source's when Labels is nil.
	Labels map[string]string
	// Kind is KindRelease (the default) or KindTombstone.
	Kind string
	// Sign, when set, signs each attempt's release: it is called inside the
	// publish loop, after the head was read and before the write, so the
	// signature names the exact generation the release replaces. It
	// returns what goes to the bucketops-signature metadata key.
	Sign func(context.Context, Attestation) (string, error)
	// IfGeneration, when not nil, is the strict mode: one attempt, written only
	// if the head is that generation (0: only if the app has no head);
	// anything else is ErrConflict.
	IfGeneration *int64
	// Retention, when not nil, sets GCS Object Retention on the new
	// generation: it can't be deleted or replaced before Until, by anyone
	// (Locked) or without overriding it (Unlocked). The bucket must have
	// object retention enabled.
	Retention *Retention

	mustExist bool  // Retire: refuse an app that has no release
	size      int64 // bucketops-size: the stream's length, uncompressed
}

// Retention modes of GCS Object Retention.
const (
	RetentionUnlocked = "Unlocked"
	RetentionLocked   = "Locked"
)

// Retention is how long a release's generation is kept undeletable.
type Retention struct {
	Until time.Time
	// Mode is RetentionUnlocked (the default: an administrator may
	// shorten or remove it) or RetentionLocked (only ever extended).
	Mode string
}

// Validate checks the retention before anything is written.
func (r *Retention) Validate(now time.Time) error {
	switch {
	case r.Mode != RetentionUnlocked && r.Mode != RetentionLocked:
		return fmt.Errorf("retention mode %q: say %s or %s", r.Mode, RetentionUnlocked, RetentionLocked)
	case !r.Until.After(now):
		return fmt.Errorf("retention until %s: that is not in the future", r.Until.Format(time.RFC3339))
	}
	return nil
}

func (r *Retention) object() *storage.ObjectRetention {
	if r == nil {
		return nil
	}
	return &storage.ObjectRetention{Mode: r.Mode, RetainUntil: r.Until.UTC()}
}

// Result is what Publish did.
type Result struct {
	Release
	// Unchanged is true when the head already held these bytes at this
	// sequence or a higher one; nothing was written.
	Unchanged bool `json:"unchanged"`
	// SupersededBy is set when this publish's write landed (behind an
	// error that hid it) and another writer's release replaced it before
	// the answer could be checked: Release is ours, no longer the head, and
	// SupersededBy is the head's generation.
	SupersededBy int64 `json:"superseded_by,omitempty"`
	// Attempts counts the read-then-write rounds (1 when uncontended).
	Attempts int `json:"-"`
}

// Publish writes p as the new head of app unless the head already holds the
// same bytes at the same or a higher sequence. The object is stored
// compressed (Content-Encoding zstd) with its uncompressed length in
// bucketops-size; the digest is over the uncompressed stream, so the same
// manifests have the same digest whether stored compressed or not (a
// tombstone is stored empty, uncompressed). It reads the head's
// attributes, refuses a stale or conflicting release, and writes with a
// generation precondition; when another writer got there first (412), or
// GCS asked to slow down (429, 5xx), it waits, reads again and retries,
// until ctx is done.
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
	if len(p.Data) > MaxReleaseBytes {
		return Result{}, fmt.Errorf("publish %s: %w: the release is %d bytes, more than the limit of %d; split the manifests into several apps", app, ErrTooLarge, len(p.Data), MaxReleaseBytes)
	}
	p.size = int64(len(p.Data))
	stored, encoding := compress(p.Data)
	return s.publish(ctx, app, p, Digest(p.Data), func(ctx context.Context, cond storage.Conditions, meta map[string]string) (*storage.ObjectAttrs, error) {
		return s.upload(ctx, app, cond, meta, stored, encoding, p.Retention.object())
	})
}

// Attestation is what a release states about itself, handed to
// Publication.Sign: everything its metadata records that a reader relies
// on, and the release it replaces.
type Attestation struct {
	App      string
	Digest   string
	Sequence uint64
	Kind     string
	Author   string
	Message  string
	Source   string
	Origin   string
	Labels   map[string]string
	// Previous is the head this release replaces; its Generation is 0 for
	// an app's first release.
	Previous Ref
	// PreviousDigest is the replaced head's digest, empty for a first release.
	PreviousDigest string
}

// MaxMetadataBytes is GCS's limit on an object's custom metadata, keys and
// values together.
const MaxMetadataBytes = 8 << 10

// writeFunc writes one release under cond and returns its attributes.
type writeFunc func(ctx context.Context, cond storage.Conditions, meta map[string]string) (*storage.ObjectAttrs, error)

// decision is what one round of the protocol does with the head it read.
type decision struct {
	unchanged bool
	// sequence is what the written release records.
	sequence uint64
	err      error
}

// decide applies the ordering rules to the head (exists false: the app has
// no release). Sequences decide before bytes do: the head must end up
// recording the highest sequence any publish offered, so the same bytes
// offered with a higher sequence are written again as a new generation
// that records it; otherwise a rebuild with unchanged output (build 30)
// would leave the head at build 10 and let build 20 overwrite it.
func decide(app string, head Release, exists bool, p Publication, digest string) decision {
	if !exists {
		return decision{sequence: p.Sequence}
	}
	// Labels are part of a release: the same bytes with other labels are a
	// new release, so that a label change reaches the ApplicationSets.
	same := head.Digest == digest && head.Kind == p.Kind && EncodeLabels(head.Labels) == EncodeLabels(p.Labels)
	seq := p.Sequence
	switch {
	case seq == 0 && same:
		return decision{unchanged: true}
	case seq == 0:
		// A release without a sequence keeps the head's, so an older
		// pipeline can't overwrite it afterwards.
		return decision{sequence: head.Sequence}
	case head.Sequence >= seq && same:
		// The head serves these bytes already, at this sequence or a
		// newer one: a CI retry, or an old pipeline whose output a newer
		// one published too.
		return decision{unchanged: true}
	case head.Sequence > seq:
		return decision{err: fmt.Errorf("publish %s: %w: the head %s has sequence %d, higher than %d; a newer release is already published", app, ErrStale, head.Ref(), head.Sequence, seq)}
	case head.Sequence == seq:
		return decision{err: fmt.Errorf("publish %s: %w: the head %s has the same sequence %d with other bytes or labels (%s); give each release its own sequence", app, ErrConflict, head.Ref(), seq, head.Digest)}
	}
	return decision{sequence: seq}
}

// publish is the protocol shared by uploads and copies. Every write carries
// a random publish id in its metadata, so that after an error that may
// hide a write's success (a 503 after GCS stored the object) our own
// release is recognised by its id, never by its bytes: another writer may
// have published the same bytes.
func (s *Store) publish(ctx context.Context, app string, p Publication, digest string, write writeFunc) (Result, error) {
	if err := ValidateLabels(p.Labels); err != nil {
		return Result{}, fmt.Errorf("publish %s: %w", app, err)
	}
	if p.Retention != nil {
		if err := p.Retention.Validate(time.Now()); err != nil {
			return Result{}, fmt.Errorf("publish %s: %w: %w", app, ErrInvalidRetention, err)
		}
	}
	id, err := newPublishID()
	if err != nil {
		return Result{}, fmt.Errorf("publish %s: %w", app, err)
	}
	checkedBucket := false
	// uncertain: a write failed in a way that may hide its success.
	uncertain := false
	for attempt := 1; ; attempt++ {
		head, err := s.Head(ctx, app)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Result{}, fmt.Errorf("publish %s: %w", app, err)
		}
		if exists && uncertain && head.PublishID == id {
			return Result{Release: head, Attempts: attempt}, nil
		}
		if !exists && p.mustExist {
			return Result{}, fmt.Errorf("publish %s: %w: the app has no release; check the name (bucketops ls)", app, ErrNotFound)
		}
		if !exists && !checkedBucket {
			// A first release: the one time worth a request to make sure
			// the bucket keeps history (and exists) before relying on it.
			if err := s.CheckBucket(ctx); err != nil {
				return Result{}, fmt.Errorf("publish %s: %w", app, err)
			}
			checkedBucket = true
		}
		if p.IfGeneration != nil && (exists && head.Generation != *p.IfGeneration || !exists && *p.IfGeneration != 0) {
			now := "it has no head"
			if exists {
				now = "the head is " + head.Ref().String()
			}
			return s.unlessOurs(ctx, app, id, uncertain, head, attempt, fmt.Errorf("publish %s: %w: --if-generation %d, but %s", app, ErrConflict, *p.IfGeneration, now))
		}
		d := decide(app, head, exists, p, digest)
		switch {
		case d.err != nil:
			return s.unlessOurs(ctx, app, id, uncertain, head, attempt, d.err)
		case d.unchanged && uncertain:
			// Our write may have landed and been replaced by the same
			// bytes at a newer sequence: say which.
			return s.unlessOurs(ctx, app, id, uncertain, head, attempt, nil)
		case d.unchanged:
			return Result{Release: head, Unchanged: true, Attempts: attempt}, nil
		}
		cond := storage.Conditions{DoesNotExist: true}
		if exists {
			cond = storage.Conditions{GenerationMatch: head.Generation}
		}
		meta := metadata(digest, d.sequence, id, p)
		if p.Sign != nil {
			att := Attestation{App: app, Digest: digest, Sequence: d.sequence, Kind: p.Kind, Author: p.Author, Message: p.Message, Source: p.Source, Origin: p.Origin, Labels: p.Labels}
			if exists {
				att.Previous, att.PreviousDigest = head.Ref(), head.Digest
			} else {
				att.Previous.App = app
			}
			sig, err := p.Sign(ctx, att)
			if err != nil {
				return Result{}, fmt.Errorf("publish %s: sign: %w", app, err)
			}
			meta[metaSignature] = sig
		}
		if n := metadataSize(meta); n > MaxMetadataBytes {
			return Result{}, fmt.Errorf("publish %s: %w: its metadata comes to %d bytes, GCS takes at most %d; shorten --message, --source or --author", app, ErrTooLarge, n, MaxMetadataBytes)
		}
		attrs, err := write(ctx, cond, meta)
		if err == nil {
			return Result{Release: s.release(app, attrs, true), Attempts: attempt}, nil
		}
		err = s.translate(ctx, err)
		switch {
		case errors.Is(err, ErrConflict) && p.IfGeneration != nil:
			return Result{}, fmt.Errorf("publish %s: %w: --if-generation %d, but the head moved during the write", app, ErrConflict, *p.IfGeneration)
		case errors.Is(err, ErrConflict):
			// Another writer won the race: read its head and decide again.
			s.log.Debug("head moved, retrying", "app", app, "attempt", attempt)
		case ctx.Err() == nil && s.shouldRetry(err):
			// Throttled (GCS allows about one write per second per object)
			// or unavailable: back off, then read the head again.
			uncertain = true
			s.log.Debug("write failed, retrying", "app", app, "attempt", attempt, "error", err)
		case p.Retention != nil && HTTPStatus(err) == http.StatusBadRequest:
			return Result{}, fmt.Errorf("publish %s: %w: GCS refused the release's Object Retention (%w); the bucket must have object retention enabled (gcloud storage buckets create --enable-per-object-retention, docs/signing.md), or publish without --retain-for/--retain-until", app, ErrInvalidRetention, err)
		default:
			return Result{}, fmt.Errorf("publish %s: %w", app, err)
		}
		if err := s.sleep(ctx, attempt); err != nil {
			return Result{}, fmt.Errorf("publish %s: gave up after %d attempts: %w", app, attempt, err)
		}
	}
}

// unlessOurs settles a round whose outcome is "nothing to write" (refused
// with refusal, or unchanged when refusal is nil) after an uncertain write:
// if that write landed and another release replaced it since, the publish
// did happen and is reported as such, superseded. Only this rare path
// reads the history.
func (s *Store) unlessOurs(ctx context.Context, app, id string, uncertain bool, head Release, attempt int, refusal error) (Result, error) {
	if uncertain {
		ours, found, err := s.findPublish(ctx, app, id)
		if err != nil {
			return Result{}, fmt.Errorf("publish %s: a write failed in a way that may hide its success, and looking for it failed: %w", app, err)
		}
		if found {
			return Result{Release: ours, SupersededBy: head.Generation, Attempts: attempt}, nil
		}
	}
	if refusal != nil {
		return Result{}, refusal
	}
	return Result{Release: head, Unchanged: true, Attempts: attempt}, nil
}

// findPublish looks for the generation written with publish id id.
func (s *Store) findPublish(ctx context.Context, app, id string) (Release, bool, error) {
	var found Release
	ok := false
	err := s.versions(ctx, app, func(r Release) bool {
		if r.PublishID == id {
			found, ok = r, true
			return false
		}
		return true
	})
	return found, ok, err
}

// newPublishID returns 128 random bits in hex.
func newPublishID() (string, error) {
	b := make([]byte, 16)
	if _, err := cryptorand.Read(b); err != nil {
		return "", fmt.Errorf("publish id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func metadata(digest string, seq uint64, id string, p Publication) map[string]string {
	m := map[string]string{metaDigest: digest, metaKind: p.Kind, metaResources: strconv.Itoa(p.Resources), metaPublishID: id, metaSize: strconv.FormatInt(p.size, 10),
		metaFormat: strconv.Itoa(Format)}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	if seq != 0 {
		m[metaSequence] = strconv.FormatUint(seq, 10)
	}
	set(metaSource, p.Source)
	set(metaAuthor, p.Author)
	set(metaMessage, p.Message)
	set(metaOrigin, p.Origin)
	set(metaLabels, EncodeLabels(p.Labels))
	return m
}

// metadataSize counts custom metadata the way GCS limits it: keys and values.
func metadataSize(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// upload writes data, stored with encoding, in a single request under
// cond. The upload is atomic: GCS checks the CRC32C (of the stored bytes)
// and makes the object visible only once complete. Retries are publish's:
// it re-reads the head first, which a blind resend of the upload would not.
func (s *Store) upload(ctx context.Context, app string, cond storage.Conditions, meta map[string]string, data []byte, encoding string, retention *storage.ObjectRetention) (*storage.ObjectAttrs, error) {
	w := s.bucket.Object(s.objectName(app)).Retryer(storage.WithPolicy(storage.RetryNever)).If(cond).NewWriter(ctx)
	w.ChunkSize = 0 // one multipart request, no resumable session
	w.ContentType = ContentType
	w.ContentEncoding = encoding
	w.CRC32C = crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	w.SendCRC32C = true
	w.Metadata = meta
	w.Retention = retention
	if _, err := w.Write(data); err != nil {
		w.CloseWithError(err)
		return nil, err
	}
	// Close is where the upload happens and where a 412 arrives.
	if err := w.Close(); err != nil {
		return nil, err
	}
	return w.Attrs(), nil
}

// sleep waits before another attempt: a short, jittered, growing pause, so
// writers racing for one app spread out.
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

// Copy makes release src the new head of dst with a server-side copy,
// recording src@generation as bucketops-origin: promote and rollback. The
// source's bytes are checked against their digest first and the copy names
// that exact generation, so a corrupt release is never copied. The copy is
// stored as the source is, compressed or (a release from before
// compression) not, with its uncompressed length in bucketops-size. The write is
// conditional on dst's head generation like any publish. p carries the new
// release's own author, message and sequence; Resources and Origin come from
// the source, and Source too when p leaves it empty.
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
	p.Resources = rel.Resources
	p.Origin = rel.Ref().String()
	if p.Labels == nil {
		p.Labels = rel.Labels
	}
	p.Kind = KindRelease
	if p.Source == "" {
		p.Source = rel.Source
	}
	p.size = int64(len(data))
	from := s.bucket.Object(s.objectName(rel.App)).Generation(rel.Generation)
	res, err := s.publish(ctx, dst, p, rel.Digest, func(ctx context.Context, cond storage.Conditions, meta map[string]string) (*storage.ObjectAttrs, error) {
		c := s.bucket.Object(s.objectName(dst)).Retryer(storage.WithPolicy(storage.RetryNever)).If(cond).CopierFrom(from)
		c.ContentType = ContentType
		// Named, not left to the rewrite's defaults: the copy's bytes are
		// the source's, so must be its encoding.
		c.ContentEncoding = rel.Encoding
		c.Metadata = meta
		c.Retention = p.Retention.object()
		return c.Run(ctx)
	})
	if err != nil || p.Retention == nil || !res.RetainUntil.IsZero() || res.Unchanged {
		return res, err
	}
	// A rewrite may leave the retention out (the emulator's does): set it
	// on the new generation, which needs no override the first time.
	attrs, err := s.bucket.Object(s.objectName(dst)).Generation(res.Generation).Update(ctx, storage.ObjectAttrsToUpdate{Retention: p.Retention.object()})
	if err != nil {
		return res, fmt.Errorf("copy %s to %s: published %s, but its Object Retention could not be set: %w; the bucket must have object retention enabled (docs/signing.md)", rel.Ref(), dst, res.Ref(), s.translate(ctx, err))
	}
	res.Release = s.release(dst, attrs, true)
	return res, nil
}

// Retire publishes a tombstone: a deliberately empty release after which the
// bridge renders nothing and Argo CD prunes the app's objects. An app with
// no release can't be retired (a typo must not create one).
func (s *Store) Retire(ctx context.Context, app string, p Publication) (Result, error) {
	p.Data = nil
	p.Resources = 0
	p.Kind = KindTombstone
	p.mustExist = true
	return s.Publish(ctx, app, p)
}
