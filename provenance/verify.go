package provenance

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"golang.org/x/sync/errgroup"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/store"
)

// Problems a Finding names: stable words for JSON output, API errors and
// metrics.
const (
	// MissingSignature: the release has no bucketops-signature.
	MissingSignature = "missing_signature"
	// UnknownKey: signed, but by no key the verifier trusts.
	UnknownKey = "unknown_key"
	// BadSignature: the signature doesn't verify with the key it names, or
	// the envelope or statement is malformed.
	BadSignature = "bad_signature"
	// DigestMismatch: the bytes are not the ones the statement signed.
	DigestMismatch = "digest_mismatch"
	// MetadataMismatch: the metadata shows a field otherwise than signed.
	MetadataMismatch = "metadata_mismatch"
	// WrongApp: the statement was signed for another app.
	WrongApp = "wrong_app"
	// Gap: the release it replaced is gone from the history.
	Gap = "gap"
	// Fork: the release doesn't replace the one before it.
	Fork = "fork"
	// Replay: an earlier release's signed statement, published again.
	Replay = "replay"
	// Truncated: the release the bridge last accepted (the app's rollback
	// floor, package floor) is gone from the history: it was deleted.
	Truncated = "truncated"
	// Rollback: the head does not descend from the rollback floor: the
	// newest releases were deleted, or an older one copied back as the
	// head. The bridge refuses it under require: signed.
	Rollback = "rollback"
)

// RolledBack reports whether a problem is one the rollback floor found.
func RolledBack(problem string) bool { return problem == Truncated || problem == Rollback }

// Key is a public key a verifier trusts, with the name the trust policy or
// command line gave it.
type Key struct {
	Name   string
	Public ed25519.PublicKey
}

// Keys are the keys a verifier trusts, by key id.
type Keys struct {
	byID map[string]Key
}

// NewKeys trusts keys.
func NewKeys(keys ...Key) Keys {
	k := Keys{byID: make(map[string]Key, len(keys))}
	for _, key := range keys {
		k.byID[KeyID(key.Public)] = key
	}
	return k
}

// Len is the number of keys trusted.
func (k Keys) Len() int { return len(k.byID) }

// Finding is the verdict on one release.
type Finding struct {
	App        string `json:"app"`
	Generation int64  `json:"generation"`
	// KeyID and Key name the trusted key that signed it, when one did.
	KeyID string `json:"key_id,omitempty"`
	Key   string `json:"key,omitempty"`
	// Problem is empty for a release that verifies, else one of the
	// constants above, explained by Detail.
	Problem string `json:"problem,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Replaced is the generation the signed statement says the release
	// replaced (0 for an app's first release, or when nothing was signed).
	Replaced int64 `json:"replaced,omitempty"`

	claim   store.Attestation
	payload []byte
}

// OK reports whether the release verified.
func (f Finding) OK() bool { return f.Problem == "" }

func (f Finding) Error() string {
	return fmt.Sprintf("%s@%d: %s: %s", f.App, f.Generation, f.Problem, f.Detail)
}

func (f *Finding) fail(problem, format string, args ...any) {
	f.Problem, f.Detail = problem, fmt.Sprintf(format, args...)
}

// open checks what one release's own attributes can tell: the signature,
// the key, and the statement against the metadata. It does not hash the
// bytes nor look at the history.
func (k Keys) open(r store.Release) Finding {
	f := Finding{App: r.App, Generation: r.Generation}
	if r.Signature == "" {
		f.fail(MissingSignature, "the release is not signed; publish it with --sign-key")
		return f
	}
	var env dsse.Envelope
	if err := json.Unmarshal([]byte(r.Signature), &env); err != nil {
		f.fail(BadSignature, "bucketops-signature is not a DSSE envelope: %v", err)
		return f
	}
	if env.PayloadType != PayloadType {
		f.fail(BadSignature, "the envelope's payload type is %q, not %s", trim(env.PayloadType), PayloadType)
		return f
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		f.fail(BadSignature, "the envelope's payload is not base64")
		return f
	}
	pae := dsse.PAE(env.PayloadType, payload)
	var ids []string
	for _, sig := range env.Signatures {
		key, ok := k.byID[sig.KeyID]
		if !ok {
			ids = append(ids, sig.KeyID)
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig.Sig)
		if err != nil || !ed25519.Verify(key.Public, pae, raw) {
			f.fail(BadSignature, "the signature by key %s (%s) does not verify: the statement or the signature was altered", key.Name, sig.KeyID)
			return f
		}
		f.KeyID, f.Key = sig.KeyID, key.Name
		break
	}
	if f.KeyID == "" {
		if len(ids) == 0 {
			f.fail(BadSignature, "the envelope holds no signature")
		} else {
			f.fail(UnknownKey, "signed by %s, which is not a trusted key; trust it (--key, or the trust policy's keys) if it is yours", strings.Join(ids, ", "))
		}
		return f
	}
	c, err := parseStatement(payload)
	if err != nil {
		f.fail(BadSignature, "the signed payload is unusable: %v", err)
		return f
	}
	f.claim, f.payload, f.Replaced = c, payload, c.Previous.Generation
	if c.App != r.App {
		f.fail(WrongApp, "the statement was signed for %s, not %s: it was copied from another app", c.App, r.App)
		return f
	}
	if m := mismatch(c, r); m != "" {
		f.fail(MetadataMismatch, "%s: the metadata was edited after signing", m)
		return f
	}
	return f
}

// Check verifies what rel's own attributes can tell: the signature by a
// trusted key, and the signed statement against the metadata. It makes no
// request, neither hashes the bytes nor looks at the history: enough to
// trust the Replaced it reports (package floor judges a head by it).
func (k Keys) Check(rel store.Release) Finding { return k.open(rel) }

// checkBytes compares the bytes' digest with the signed one.
func (f *Finding) checkBytes(data []byte) {
	if f.OK() {
		if got := store.Digest(data); got != f.claim.Digest {
			f.fail(DigestMismatch, "the bytes hash to %s, but the signed statement says %s: they were rewritten after signing", got, f.claim.Digest)
		}
	}
}

// link checks that the claim names prev (nil: no release before this one)
// as the release it replaced; when it doesn't, named tells whether the
// generation it does name still exists.
func (f *Finding) link(prev *store.Release, named func(gen int64) (bool, error)) error {
	if !f.OK() {
		return nil
	}
	c := f.claim
	switch {
	case prev != nil && c.Previous.Generation == prev.Generation:
		if c.PreviousDigest != prev.Digest {
			f.fail(DigestMismatch, "it replaced %s@%d holding %s, but that release now records %s", f.App, c.Previous.Generation, c.PreviousDigest, prev.Digest)
		}
		return nil
	case prev == nil && c.Previous.Generation == 0:
		return nil
	case c.Previous.Generation == 0:
		f.fail(Fork, "the statement says it is the app's first release, but %s@%d came before it", f.App, prev.Generation)
		return nil
	}
	exists, err := named(c.Previous.Generation)
	if err != nil {
		return err
	}
	switch {
	case !exists:
		f.fail(Gap, "it replaced %s@%d, which is gone from the history: that release was deleted (or expired by a lifecycle rule)", f.App, c.Previous.Generation)
	case prev == nil:
		f.fail(Fork, "it replaced %s@%d, which is newer than it", f.App, c.Previous.Generation)
	default:
		f.fail(Fork, "it replaced %s@%d, but %s@%d came between them: the history was rewritten", f.App, c.Previous.Generation, f.App, prev.Generation)
	}
	return nil
}

// Releases is what verification reads of the bucket; *store.Store has it.
type Releases interface {
	History(ctx context.Context, app string, opts store.HistoryOptions) ([]store.Release, error)
	Stat(ctx context.Context, ref store.Ref) (store.Release, error)
}

// Verify checks rel, whose bytes the caller has already checked against
// rel.Digest (store.Read does), against the keys and against the release
// right before it in the history: what the bridge does before rendering.
// An error is a failure to read the bucket, not a verdict.
func (k Keys) Verify(ctx context.Context, h Releases, rel store.Release) (Finding, error) {
	f := k.open(rel)
	if !f.OK() {
		return f, nil
	}
	before, err := h.History(ctx, rel.App, store.HistoryOptions{Before: rel.Generation, Limit: 1})
	if err != nil {
		return f, fmt.Errorf("verify %s: %w", rel.Ref(), err)
	}
	var prev *store.Release
	if len(before) == 1 {
		prev = &before[0]
	}
	err = f.link(prev, func(gen int64) (bool, error) {
		_, err := h.Stat(ctx, store.Ref{App: rel.App, Generation: gen})
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	return f, err
}

// VerifyRef reads the release ref names (the head when its generation is
// 0), hashes its bytes and verifies it.
func (k Keys) VerifyRef(ctx context.Context, s *store.Store, ref store.Ref) (Finding, error) {
	rel, err := s.Stat(ctx, ref)
	if err != nil {
		return Finding{}, err
	}
	f, err := k.Verify(ctx, s, rel)
	if err != nil || !f.OK() {
		return f, err
	}
	if err := f.readBytes(ctx, s, rel); err != nil {
		return f, err
	}
	return f, nil
}

// readBytes reads the release's bytes and compares them with the claim.
func (f *Finding) readBytes(ctx context.Context, s *store.Store, rel store.Release) error {
	data, err := s.Bytes(ctx, rel)
	if errors.Is(err, store.ErrCorrupt) {
		// The metadata's digest is the signed one (open checked), so the
		// bytes are not what was signed.
		f.fail(DigestMismatch, "the bytes are not the ones signed: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	f.checkBytes(data)
	return nil
}

// ChainOptions tune VerifyChain.
type ChainOptions struct {
	// SkipBytes checks signatures and links from one listing, without
	// reading and hashing every release's bytes.
	SkipBytes bool
	// Parallel reads at once (default 16).
	Parallel int
	// Floor is the app's rollback floor (floor.Floors.Get; the zero Mark
	// when the bridge has accepted none): the chain must still hold it and
	// the head must descend from it.
	Floor floor.Mark
	// Listed, when not nil, hears how many releases the history listing
	// has given so far; Checked how many of total releases' bytes have
	// been read and hashed. Both are called from one goroutine at a time.
	Listed  func(n int)
	Checked func(done, total int)
}

// VerifyChain verifies every release of app, oldest first, and the chain
// they form: each must replace the release right before it, no statement
// may appear twice, and none may name a release that is gone. With a
// floor, the floor's release must still be there (else a Truncated
// finding for its generation, after the releases) and the head must
// descend from it (else the head's finding is a Rollback).
func (k Keys) VerifyChain(ctx context.Context, s *store.Store, app string, opts ChainOptions) ([]Finding, error) {
	hist, err := s.History(ctx, app, store.HistoryOptions{Listed: opts.Listed})
	if err != nil {
		return nil, err
	}
	sort.Slice(hist, func(i, j int) bool { return hist[i].Generation < hist[j].Generation })
	findings := make([]Finding, len(hist))
	for i, r := range hist {
		findings[i] = k.open(r)
	}
	if !opts.SkipBytes {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(cmp.Or(opts.Parallel, 16))
		var mu sync.Mutex
		done := 0
		for i, r := range hist {
			if !findings[i].OK() {
				continue
			}
			g.Go(func() error {
				err := findings[i].readBytes(gctx, s, r)
				if opts.Checked != nil {
					mu.Lock()
					done++
					opts.Checked(done, len(hist))
					mu.Unlock()
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	exists := make(map[int64]bool, len(hist))
	for _, r := range hist {
		exists[r.Generation] = true
	}
	named := func(gen int64) (bool, error) { return exists[gen], nil }
	seen := map[[32]byte]int64{}  // statement digest → first generation
	replaced := map[int64]int64{} // generation → the release that replaced it
	for i := range findings {
		f := &findings[i]
		if !f.OK() {
			continue
		}
		sum := sha256.Sum256(f.payload)
		if first, ok := seen[sum]; ok {
			f.fail(Replay, "its signed statement is %s@%d's, published again: an old release replayed as a new one", app, first)
			continue
		}
		seen[sum] = f.Generation
		if other, ok := replaced[f.claim.Previous.Generation]; ok && f.claim.Previous.Generation != 0 {
			f.fail(Fork, "it replaced %s@%d, as %s@%d did: the history forked there", app, f.claim.Previous.Generation, app, other)
			continue
		}
		replaced[f.claim.Previous.Generation] = f.Generation
		var prev *store.Release
		if i > 0 {
			prev = &hist[i-1]
		}
		f.link(prev, named)
	}
	return append(findings, checkFloor(app, hist, findings, opts.Floor)...), nil
}

// checkFloor judges the history against the rollback floor: a deleted
// floor release is a Truncated finding of its own, and a head that doesn't
// descend from the floor turns the head's finding into a Rollback.
func checkFloor(app string, hist []store.Release, findings []Finding, m floor.Mark) []Finding {
	if m.Generation == 0 || len(hist) == 0 {
		return nil
	}
	var extra []Finding
	if !slices.ContainsFunc(hist, func(r store.Release) bool { return r.Generation == m.Generation }) {
		extra = append(extra, Finding{App: app, Generation: m.Generation, Problem: Truncated,
			Detail: "the rollback floor " + m.String() + ", the newest release the bridge accepted, is gone from the history: it was deleted (or expired by a lifecycle rule)"})
	}
	findings[len(findings)-1].CheckHead(m)
	return extra
}

// CheckHead judges f, the verified finding of the app's head, against the
// app's rollback floor m, by what f's signed statement says: a head that
// doesn't descend from the floor becomes a Rollback. A finding that
// already failed is left alone.
func (f *Finding) CheckHead(m floor.Mark) {
	if !f.OK() || m.Admits(floor.Claim{Generation: f.Generation, Digest: f.claim.Digest, Replaced: f.Replaced}) {
		return
	}
	if f.Generation < m.Generation {
		f.fail(Rollback, "the head is older than the rollback floor %s: the generations after it were deleted; the bridge refuses it under require: signed", m)
	} else {
		f.fail(Rollback, "the head replaced %s@%d, older than the rollback floor %s: an older signed release was copied back as the head; the bridge refuses it under require: signed", m.App, f.Replaced, m)
	}
}

// Trusts reports whether the key with id is trusted.
func (k Keys) Trusts(id string) bool {
	_, ok := k.byID[id]
	return ok
}
