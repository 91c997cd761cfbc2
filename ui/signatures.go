package ui

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"

	"github.com/bucketops/bucketops/cache"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
)

// signatureCacheBytes bounds the verdicts the pages keep: about 0.3 KiB
// each, so some 10,000 releases, an activity answer's worth.
const signatureCacheBytes = 4 << 20

// noTrustPolicy is why the pages check nothing without a trust policy.
const noTrustPolicy = "the bridge has no trust policy (--trust-policy)"

// signatures judges releases' signatures for the pages, by the trust
// policy in force (Config.Trust) and provenance.Judge, the bridge's own
// checks: from the listing a page already holds, with no request of its
// own. A verdict costs an Ed25519 verification and the statement's
// parsing; it is kept, least recently used evicted first, under a key
// that covers everything it was judged from (the policy's digest, the
// release's signature and metadata, and the release before it), so a
// changed policy or an edited release is judged again.
type signatures struct {
	trust  func() *provenance.TrustPolicy
	cached *cache.LRU[[32]byte, provenance.Status]
}

func newSignatures(trust func() *provenance.TrustPolicy) *signatures {
	return &signatures{trust: trust, cached: cache.New[[32]byte, provenance.Status](signatureCacheBytes)}
}

// judge returns what the pages judge by now: the policy in force, read
// once per page so that a page is judged by one policy.
func (s *signatures) judge() (provenance.Judge, string) {
	if s.trust == nil {
		return provenance.NotChecked(noTrustPolicy), ""
	}
	p := s.trust()
	if p == nil {
		return provenance.NotChecked(noTrustPolicy), ""
	}
	return provenance.PolicyJudge(p), p.Digest
}

// listed judges rel from newestFirst, its app's whole history (see
// provenance.Judge.Listed), as of policy, the judge's policy digest.
func (s *signatures) listed(j provenance.Judge, policy string, rel store.Release, newestFirst []store.Release) provenance.Status {
	if !j.Checks() {
		return j.Listed(rel, nil)
	}
	key := fingerprint(policy, rel, before(rel, newestFirst))
	if st, ok := s.cached.Get(key); ok {
		return st
	}
	st := j.Listed(rel, newestFirst)
	// A broken link's verdict (gap or fork) also depends on which other
	// generations exist, which the key doesn't cover: it is not kept.
	if st.Problem != provenance.Gap && st.Problem != provenance.Fork {
		s.cached.Add(key, st, int64(256+len(st.Key)+len(st.KeyID)+len(st.Detail)))
	}
	return st
}

// before returns the release right before rel in newestFirst, or nil.
func before(rel store.Release, newestFirst []store.Release) *store.Release {
	i := sort.Search(len(newestFirst), func(i int) bool { return newestFirst[i].Generation < rel.Generation })
	if i == len(newestFirst) {
		return nil
	}
	return &newestFirst[i]
}

// fingerprint hashes what a verdict is judged from.
func fingerprint(policy string, rel store.Release, prev *store.Release) [32]byte {
	h := sha256.New()
	field := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	num := func(n int64) { h.Write(binary.AppendVarint(nil, n)) }
	field(policy)
	field(rel.App)
	num(rel.Generation)
	field(rel.Signature)
	field(rel.Digest)
	num(int64(rel.Sequence))
	field(rel.Kind)
	field(rel.Author)
	field(rel.Message)
	field(rel.Source)
	field(rel.Origin)
	field(store.EncodeLabels(rel.Labels))
	if prev != nil {
		num(prev.Generation)
		field(prev.Digest)
	} else {
		num(0)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// judgedRelease is a release with its signature's status, as the activity
// export writes it.
type judgedRelease struct {
	store.Release
	SignatureStatus provenance.Status `json:"signature"`
}

// signatureColumns are the activity CSV's columns for a release's
// signature, after the others.
var signatureColumns = []string{"signature", "signature_key", "signature_key_id", "signature_rule", "signature_problem"}

// signatureCells are st in signatureColumns' order: the state
// (verified, unsigned, broken, not_checked), the key that signed, the
// trust rule judged by (`trust rule "prod" (require: signed)`), and a
// broken or unsigned release's problem.
func signatureCells(st provenance.Status) []string {
	rule := ""
	if st.Rule != nil {
		rule = st.Rule.String()
	}
	return []string{st.State, st.Key, st.KeyID, rule, st.Problem}
}
