// Package floor owns each app's rollback floor: the newest signed release
// the bridge has accepted for the app, kept in the bucket so that every
// replica, and every bridge after a restart, judges against the same one.
//
// The contract. A floor only ever rises. It is one small JSON object per
// app, [PREFIX/].bucketops/floor/<app>.json (".bucketops" can't be an app
// segment, and the name never ends in /manifests.yaml, so no listing of
// releases sees it), written with generation preconditions: created with
// DoesNotExist, replaced with GenerationMatch, and on a lost race read
// again and never lowered. The bucket is versioned, so a floor object
// deleted by someone holding delete rights is restored from its own
// noncurrent versions: deleting it does not reset it. Admit is the rule
// the bridge applies on every request for an app under require: signed; a
// floor that can't be read or written fails the request closed.
//
// The floor protects against what a holder of delete (and copy) rights
// can do without a signing key: delete the newest generations so that an
// older signed release becomes the head again, or copy an older signed
// release back as the head. Both leave a head whose signed statement
// replaced a release older than the floor, which no signed publish after
// the floor could have produced.
package floor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/bucketops/bucketops/store"
)

// Dir is where floors live below the location's prefix.
const Dir = ".bucketops/floor"

// ErrRollback: the release asked for is older than the app's floor and its
// head no longer descends from the floor.
var ErrRollback = errors.New("rollback below the floor")

// ErrUnavailable: the floor could not be read or written, so nothing is
// served (fail closed).
var ErrUnavailable = errors.New("rollback floor unavailable")

// Mark is an app's floor: the newest signed release the bridge accepted.
type Mark struct {
	App        string `json:"app"`
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
	// Accepted is when the bridge accepted it.
	Accepted time.Time `json:"accepted"`
}

// String names the floor's release for messages: app@generation (digest,
// accepted time).
func (m Mark) String() string {
	return fmt.Sprintf("%s@%d (%s, accepted %s)", m.App, m.Generation, m.Digest, m.Accepted.Format(time.RFC3339))
}

// Claim is what a verified signed release says about its place in the
// chain.
type Claim struct {
	Generation int64
	Digest     string
	// Replaced is the generation its signed statement says it replaced (0
	// for an app's first release).
	Replaced int64
}

// Admits reports whether c is the floor's release or was signed after it:
// its statement replaced the floor's release or a newer one. A copy of an
// older signed release names an older one. The zero Mark admits anything.
func (m Mark) Admits(c Claim) bool {
	if m.Generation == 0 {
		return true
	}
	if c.Generation == m.Generation {
		return c.Digest == m.Digest
	}
	return c.Generation > m.Generation && c.Replaced >= m.Generation
}

// Floors reads and raises floors in one location.
type Floors struct {
	bucket *storage.BucketHandle
	loc    store.Location
	now    func() time.Time
}

// New returns the floors of loc, through client.
func New(client *storage.Client, loc store.Location) *Floors {
	return &Floors{bucket: client.Bucket(loc.Bucket), loc: loc, now: time.Now}
}

// ObjectName is the name of app's floor object in the bucket.
func (f *Floors) ObjectName(app string) string {
	name := Dir + "/" + app + ".json"
	if f.loc.Prefix != "" {
		name = f.loc.Prefix + "/" + name
	}
	return name
}

func (f *Floors) object(app string) *storage.ObjectHandle {
	return f.bucket.Object(f.ObjectName(app))
}

// Get returns app's floor (the zero Mark when it has none). A floor object
// that was deleted is read from its newest noncurrent version.
func (f *Floors) Get(ctx context.Context, app string) (Mark, error) {
	m, _, _, err := f.get(ctx, app)
	return m, err
}

// get returns the floor, the live object's generation (0: none) and
// whether the floor came from a noncurrent version.
func (f *Floors) get(ctx context.Context, app string) (Mark, int64, bool, error) {
	if err := store.ValidateApp(app); err != nil {
		return Mark{}, 0, false, err
	}
	m, gen, err := f.read(ctx, f.object(app))
	if err == nil {
		return m, gen, false, nil
	}
	if !errors.Is(err, storage.ErrObjectNotExist) {
		return Mark{}, 0, false, f.fail("read the floor of "+app, err)
	}
	// Deleted, or never written: the newest noncurrent version, if any,
	// is the floor (floors only rise, so the newest is the highest).
	it := f.bucket.Objects(ctx, &storage.Query{Prefix: f.ObjectName(app), Versions: true})
	var newest int64
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return Mark{}, 0, false, f.fail("list the floor versions of "+app, err)
		}
		if attrs.Name == f.ObjectName(app) && attrs.Generation > newest {
			newest = attrs.Generation
		}
	}
	if newest == 0 {
		return Mark{}, 0, false, nil
	}
	m, _, err = f.read(ctx, f.object(app).Generation(newest))
	if err != nil {
		return Mark{}, 0, false, f.fail("read the deleted floor of "+app, err)
	}
	return m, 0, true, nil
}

func (f *Floors) read(ctx context.Context, obj *storage.ObjectHandle) (Mark, int64, error) {
	r, err := obj.NewReader(ctx)
	if err != nil {
		return Mark{}, 0, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return Mark{}, 0, err
	}
	var m Mark
	if err := json.Unmarshal(data, &m); err != nil || m.Generation <= 0 {
		return Mark{}, 0, fmt.Errorf("%s@%d is not a floor bucketops wrote (%v); delete it only if you mean to reset the floor", obj.ObjectName(), r.Attrs.Generation, err)
	}
	return m, r.Attrs.Generation, nil
}

// Raise makes m app's floor unless the floor is already at or above it,
// and returns the floor in force afterwards. Racing raisers converge on
// the highest; a deleted floor is written back first.
func (f *Floors) Raise(ctx context.Context, m Mark) (Mark, error) {
	for {
		cur, gen, _, err := f.get(ctx, m.App)
		if err != nil {
			return Mark{}, err
		}
		next := m
		if cur.Generation >= m.Generation {
			if gen != 0 {
				return cur, nil
			}
			next = cur // restore a deleted floor as it was
		}
		if next.Accepted.IsZero() {
			next.Accepted = f.now().UTC()
		}
		cond := storage.Conditions{DoesNotExist: true}
		if gen != 0 {
			cond = storage.Conditions{GenerationMatch: gen}
		}
		data, err := json.Marshal(next)
		if err != nil {
			return Mark{}, err
		}
		w := f.object(m.App).If(cond).NewWriter(ctx)
		w.ContentType = "application/json"
		w.ChunkSize = 0
		if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
			w.CloseWithError(err)
			return Mark{}, f.fail("raise the floor of "+m.App, err)
		}
		if err := w.Close(); err != nil {
			if store.HTTPStatus(err) == http.StatusPreconditionFailed {
				if err := ctx.Err(); err != nil {
					return Mark{}, f.fail("raise the floor of "+m.App, err)
				}
				continue // another raiser won: read it and judge again
			}
			return Mark{}, f.fail("raise the floor of "+m.App, err)
		}
		if next.Generation >= m.Generation {
			return next, nil
		}
	}
}

// Admit judges one request for app's release served, a release whose
// signature was verified under require: signed, against the floor, on
// every request: there is no memory per replica that could disagree.
//
//   - A release at or above the floor (the floor's own, or one whose
//     signed statement replaced the floor's release or a newer one) is
//     served, and raises the floor to it.
//   - An older release is served only while the app's head still descends
//     from the floor: an Application pinned to an older revision, or
//     rolled back through Argo CD's history, is Argo CD's decision. head
//     returns the head's verified claim; an error there refuses.
//   - Anything else is ErrRollback: the history was truncated, or an older
//     signed release was copied back as the head.
func (f *Floors) Admit(ctx context.Context, app string, served Claim, head func(context.Context) (Claim, error)) error {
	m, live, _, err := f.get(ctx, app)
	if err != nil {
		return err
	}
	if m.Admits(served) {
		if served.Generation > m.Generation || live == 0 && m.Generation != 0 {
			// Raise also writes a deleted floor back.
			if _, err := f.Raise(ctx, Mark{App: app, Generation: served.Generation, Digest: served.Digest}); err != nil {
				return err
			}
		}
		return nil
	}
	h, err := head(ctx)
	if err == nil && m.Admits(h) {
		return nil
	}
	return &RollbackError{Floor: m, Served: served, Head: h, HeadErr: err}
}

// RollbackError refuses a release below the floor. It wraps ErrRollback.
type RollbackError struct {
	Floor   Mark
	Served  Claim
	Head    Claim
	HeadErr error
}

func (e *RollbackError) Unwrap() error { return ErrRollback }

func (e *RollbackError) Error() string {
	app := e.Floor.App
	why := fmt.Sprintf("its head %s@%d replaced %s@%d, older than the floor", app, e.Head.Generation, app, e.Head.Replaced)
	switch {
	case e.HeadErr != nil:
		why = "its head can't be judged: " + e.HeadErr.Error()
	case e.Head.Generation < e.Floor.Generation:
		why = fmt.Sprintf("its head %s@%d is older than the floor: newer generations were deleted", app, e.Head.Generation)
	}
	return fmt.Sprintf("rollback: %s@%d is older than the rollback floor %s, and %s; "+
		"deleting the newest generations or copying an older release back is a rollback no signature allows, and Argo CD keeps what it last deployed. "+
		"To go back deliberately, publish a signed rollback (bucketops rollback %s --to GEN --sign-key KEY), or see docs/signing.md to lower the floor",
		app, e.Served.Generation, e.Floor, why, app)
}

// fail wraps a failure to read or write a floor in ErrUnavailable.
func (f *Floors) fail(what string, err error) error {
	return fmt.Errorf("%w: %s in %s: %w; the bridge needs to read, create and delete objects under %s/ (docs/argocd.md)", ErrUnavailable, what, f.loc, err, Dir)
}
