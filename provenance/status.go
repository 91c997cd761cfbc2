package provenance

import (
	"fmt"
	"sort"

	"github.com/bucketops/bucketops/store"
)

// The states of a release's signature a Status names: stable words for
// JSON output, exports and CSS classes.
const (
	// StateVerified: signed by a trusted key, the statement matching the
	// metadata (and the bytes, when they were read), and chained to the
	// release right before it.
	StateVerified = "verified"
	// StateUnsigned: the release carries no signature (MissingSignature),
	// where the keys it was judged by expected one.
	StateUnsigned = "unsigned"
	// StateBroken: signed, but a check failed; Status.Problem names which.
	StateBroken = "broken"
	// StateNotChecked: nothing was checked: no keys were given, no trust
	// policy is in force, its rule for the app says require: off, or no
	// rule covers the app. Status.Detail says which.
	StateNotChecked = "not_checked"
)

// Status is how one release's signature stands, as bucketops log and show
// print it and the auditors' pages show it.
type Status struct {
	// State is one of the State constants.
	State string `json:"state"`
	// Key and KeyID name the trusted key whose signature verified: always
	// for a verified release, and for one broken by a later check (its
	// metadata, bytes or link).
	Key   string `json:"key,omitempty"`
	KeyID string `json:"key_id,omitempty"`
	// Rule is the trust rule the release was judged under; nil when it was
	// judged by keys given directly (verify --key), or not at all.
	Rule *RuleRef `json:"rule,omitempty"`
	// Problem is one of the Problem constants (MissingSignature for an
	// unsigned release), explained by Detail; for a release not checked,
	// Detail alone says why.
	Problem string `json:"problem,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// BytesChecked: the release's bytes were hashed and compared with the
	// signed digest too. Without it the verdict is the listing's: the
	// bytes were not read.
	BytesChecked bool `json:"bytes_checked,omitempty"`
}

// RuleRef names a trust rule: its prefix ("" covers every app) and what
// it requires.
type RuleRef struct {
	Prefix  string `json:"prefix"`
	Require string `json:"require"`
}

func (r RuleRef) String() string {
	return fmt.Sprintf("trust rule %q (require: %s)", r.Prefix, r.Require)
}

// Short is the status in a few words, for a table cell: "verified (ci-2026)",
// "unsigned", "broken: gap", "not checked".
func (s Status) Short() string {
	switch s.State {
	case StateVerified:
		return "verified (" + s.Key + ")"
	case StateBroken:
		return "broken: " + s.Problem
	case StateNotChecked:
		return "not checked"
	}
	return s.State
}

// String is the status in one line, with the key id, the trust rule and
// the detail.
func (s Status) String() string {
	var out string
	switch s.State {
	case StateVerified:
		out = fmt.Sprintf("verified: signed by %s (%s)", s.Key, s.KeyID)
		if s.Rule != nil {
			out += ", " + s.Rule.String()
		}
		if s.BytesChecked {
			out += "; the bytes match the signed digest"
		}
		return out
	case StateUnsigned, StateBroken:
		out = s.Short() + ": " + s.Detail
		if s.Rule != nil {
			out += " (" + s.Rule.String() + ")"
		}
		return out
	}
	if s.Detail == "" {
		return "not checked"
	}
	return "not checked: " + s.Detail
}

// Judge tells how releases' signatures stand, by the same checks the
// bridge makes before it serves a release (Keys.Verify, and the bytes'
// digest), against the keys of the trust policy's rule for each app, or
// against keys given directly. It judges from a listing of the app's
// history and makes no request of its own. The zero Judge has nothing to
// judge by: every release is StateNotChecked.
//
// What it does not judge: the rollback floor (verify judges the head
// against it) and replays that only a walk of the whole chain finds
// (VerifyChain); a replayed release still shows as a Fork, as it does to
// the bridge.
type Judge struct {
	policy *TrustPolicy
	keys   *Keys
	// why explains a zero Judge's "not checked".
	why string
}

// PolicyJudge judges each app's releases against its rule in p; a nil p
// checks nothing ("no trust policy is in force").
func PolicyJudge(p *TrustPolicy) Judge {
	if p == nil {
		return NotChecked("no trust policy is in force")
	}
	return Judge{policy: p}
}

// KeysJudge judges every release against k, whatever its app.
func KeysJudge(k Keys) Judge { return Judge{keys: &k} }

// NotChecked checks nothing, and says why.
func NotChecked(why string) Judge { return Judge{why: why} }

// Checks reports whether the judge has keys or a policy to judge by.
func (j Judge) Checks() bool { return j.policy != nil || j.keys != nil }

// Listed judges rel from newestFirst, the app's whole history as
// store.History lists it (newest first): the signature by a trusted key
// and the statement against rel's metadata (Keys.Check), and the release
// right before rel in that listing against the one the statement says it
// replaced. rel's attributes are the ones judged (they may be fresher
// than its entry in the listing). No request, no bytes hashed: what a
// page of a timeline can afford per row.
func (j Judge) Listed(rel store.Release, newestFirst []store.Release) Status {
	return j.judge(rel, newestFirst, nil, false)
}

// Read judges rel as Listed does, and then data, its bytes, against the
// digest its statement signed: what a page or command that read the
// release anyway can add.
func (j Judge) Read(rel store.Release, newestFirst []store.Release, data []byte) Status {
	return j.judge(rel, newestFirst, data, true)
}

func (j Judge) judge(rel store.Release, newestFirst []store.Release, data []byte, withBytes bool) Status {
	keys, rule, st, ok := j.keysFor(rel.App)
	if !ok {
		return st
	}
	f := keys.open(rel)
	if f.OK() {
		// The listing is sorted by generation, newest first: the release
		// before rel is the first one with a lower generation.
		i := sort.Search(len(newestFirst), func(i int) bool { return newestFirst[i].Generation < rel.Generation })
		var prev *store.Release
		if i < len(newestFirst) {
			prev = &newestFirst[i]
		}
		f.link(prev, func(gen int64) (bool, error) {
			k := sort.Search(len(newestFirst), func(k int) bool { return newestFirst[k].Generation <= gen })
			return k < len(newestFirst) && newestFirst[k].Generation == gen, nil
		})
	}
	if withBytes {
		f.checkBytes(data)
	}
	st = status(f, rule)
	st.BytesChecked = withBytes && f.OK()
	return st
}

// keysFor returns the keys rel's app is judged by and the rule that names
// them, or the not-checked status when there are none.
func (j Judge) keysFor(app string) (Keys, *RuleRef, Status, bool) {
	switch {
	case j.keys != nil:
		return *j.keys, nil, Status{}, true
	case j.policy == nil:
		return Keys{}, nil, Status{State: StateNotChecked, Detail: j.why}, false
	}
	r, ok := j.policy.RuleFor(app)
	if !ok {
		return Keys{}, nil, Status{State: StateNotChecked, Detail: "no rule of the trust policy covers " + app + ": the bridge refuses to serve it"}, false
	}
	ref := &RuleRef{Prefix: r.Prefix, Require: r.Require}
	if r.Require == RequireOff {
		return Keys{}, ref, Status{State: StateNotChecked, Rule: ref, Detail: fmt.Sprintf("the trust rule %q says require: off", r.Prefix)}, false
	}
	return r.Keys(), ref, Status{}, true
}

func status(f Finding, rule *RuleRef) Status {
	st := Status{Rule: rule, Key: f.Key, KeyID: f.KeyID, Problem: f.Problem, Detail: f.Detail}
	switch f.Problem {
	case "":
		st.State = StateVerified
	case MissingSignature:
		st.State = StateUnsigned
	default:
		st.State = StateBroken
	}
	return st
}
