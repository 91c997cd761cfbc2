package provenance_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// TestJudgeAgreesWithTheBridge: what the pages and log show of each
// release, judged from one listing with no request of its own, is what
// the bridge's check (Keys.Verify, which reads the release before it)
// finds: verified by which key, unsigned, or broken by which problem.
func TestJudgeAgreesWithTheBridge(t *testing.T) {
	b := storetest.New(t, true)
	s := b.Store(t, "")
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := provenance.NewKeySigner(priv)
	keys := provenance.NewKeys(provenance.Key{Name: "ci", Public: signer.Public()})
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	signed := func(app string, n int) []store.Release {
		var out []store.Release
		for i := 1; i <= n; i++ {
			out = append(out, publish(t, s, signer, app, i))
		}
		return out
	}
	object := func(app string) string { return app + "/manifests.yaml" }

	signed("app/good", 3)
	signed("app/unsigned", 2)
	publish(t, s, nil, "app/unsigned", 3)
	signed("app/edited", 3)
	b.EditMetadata(t, object("app/edited"), "bucketops-author", "mallory")
	signed("app/other-key", 2)
	publish(t, s, provenance.NewKeySigner(otherPriv), "app/other-key", 3)
	gap := signed("app/gap", 3)
	b.DeleteGeneration(t, object("app/gap"), gap[1].Generation)

	// Newest first: the head's state, then the others'.
	want := map[string][]string{
		"app/good":      {"verified", "verified", "verified"},
		"app/unsigned":  {"unsigned", "verified", "verified"},
		"app/edited":    {"broken: metadata_mismatch", "verified", "verified"},
		"app/other-key": {"broken: unknown_key", "verified", "verified"},
		"app/gap":       {"broken: gap", "verified"},
	}
	judge := provenance.KeysJudge(keys)
	for app, states := range want {
		hist, err := s.History(t.Context(), app, store.HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != len(states) {
			t.Fatalf("%s: %d releases, want %d", app, len(hist), len(states))
		}
		for i, rel := range hist {
			st := judge.Listed(rel, hist)
			got := st.State
			if st.State == provenance.StateBroken {
				got += ": " + st.Problem
			}
			if got != states[i] {
				t.Errorf("%s@%d: %s (%s), want %s", app, rel.Generation, got, st, states[i])
			}
			f, err := keys.Verify(t.Context(), s, rel)
			if err != nil {
				t.Fatal(err)
			}
			if f.Problem != st.Problem || f.Detail != st.Detail || f.KeyID != st.KeyID {
				t.Errorf("%s@%d: judged %+v, the bridge finds %+v", app, rel.Generation, st, f)
			}
			if st.State == provenance.StateVerified && (st.Key != "ci" || st.KeyID != provenance.KeyID(signer.Public()) || st.Rule != nil) {
				t.Errorf("%s@%d: verified by %q (%s) under %v, want ci (%s) and no rule", app, rel.Generation, st.Key, st.KeyID, st.Rule, provenance.KeyID(signer.Public()))
			}
		}
	}

	// The bytes, when read: the release page and show check them too.
	hist, _ := s.History(t.Context(), "app/good", store.HistoryOptions{})
	head, data, err := s.Read(t.Context(), hist[0].Ref())
	if err != nil {
		t.Fatal(err)
	}
	if st := judge.Read(head, hist, data); st.State != provenance.StateVerified || !st.BytesChecked {
		t.Errorf("the head read with its bytes: %s", st)
	}
	if st := judge.Read(head, hist, manifest("app/good", 99)); st.Problem != provenance.DigestMismatch || st.BytesChecked {
		t.Errorf("the head with other bytes: %s", st)
	}
	if st := judge.Listed(head, hist); st.BytesChecked {
		t.Errorf("judged from the listing, it says the bytes were checked: %s", st)
	}

	// Under a trust policy: the rule in force is named; require: off, an
	// app no rule covers, and no policy at all are not checked, and say why.
	pemPub, err := provenance.MarshalPublicKey(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	p, err := provenance.ParseTrustPolicy(t.Context(), []byte(fmt.Sprintf(`keys:
  ci-2026: |
%s
rules:
  - {prefix: app, require: warn, keys: [ci-2026]}
  - {prefix: sandbox, require: "off"}
`, indent(string(pemPub)))), nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, s, signer, "sandbox/x", 1)
	publish(t, s, signer, "dev/x", 1)
	for app, want := range map[string]string{
		"app/good":  `verified: signed by ci-2026 (` + provenance.KeyID(signer.Public()) + `), trust rule "app" (require: warn)`,
		"app/gap":   `broken: gap: it replaced app/gap@`,
		"sandbox/x": `not checked: the trust rule "sandbox" says require: off`,
		"dev/x":     `not checked: no rule of the trust policy covers dev/x`,
	} {
		hist, err := s.History(t.Context(), app, store.HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := provenance.PolicyJudge(p).Listed(hist[0], hist).String(); !strings.HasPrefix(got, want) {
			t.Errorf("%s under the policy: %q, want %q", app, got, want)
		}
		if got := provenance.PolicyJudge(nil).Listed(hist[0], hist); got.State != provenance.StateNotChecked || got.Key != "" {
			t.Errorf("%s without a policy: %+v", app, got)
		}
	}
}
