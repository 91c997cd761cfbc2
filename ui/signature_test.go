package ui_test

import (
	"crypto/ed25519"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

// TestSignatureStatus: under the bridge's trust policy, the timeline, the
// release page and the activity export say of each release whether it is
// verified (by which key, under which rule), unsigned, or broken (which
// check failed), by the bridge's own checks, at no bucket request per row;
// without a policy (or after a reload takes it away) they say "not
// checked".
func TestSignatureStatus(t *testing.T) {
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := provenance.NewKeySigner(priv)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	publish := func(n int, s provenance.Signer) int64 {
		t.Helper()
		rel, err := render.AssembleStream("cm.yaml", strings.NewReader(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: pay\ndata:\n  n: %q\n", fmt.Sprint(n))))
		if err != nil {
			t.Fatal(err)
		}
		p := store.Publication{Data: rel.Bytes, Resources: 1, Sequence: uint64(n), Author: "ci-bot", Message: fmt.Sprintf("build %d", n)}
		if s != nil {
			p.Sign = provenance.Sign(s)
		}
		res, err := st.Publish(t.Context(), "prod/web", p)
		if err != nil {
			t.Fatal(err)
		}
		return res.Generation
	}
	verified := publish(1, signer)
	unsigned := publish(2, nil)
	edited := publish(3, signer)
	tb.EditMetadata(t, "prod/web/manifests.yaml", "bucketops-author", "mallory")
	untrusted := publish(4, provenance.NewKeySigner(otherPriv))

	pemPub, err := provenance.MarshalPublicKey(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	policy, err := provenance.ParseTrustPolicy(t.Context(), []byte("keys:\n  ci-2026: |\n    "+strings.ReplaceAll(strings.TrimSpace(string(pemPub)), "\n", "\n    ")+
		"\nrules:\n  - {prefix: prod, require: signed, keys: [ci-2026]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var inForce atomic.Pointer[provenance.TrustPolicy]
	inForce.Store(policy)
	u, err := ui.New(ui.Config{Releases: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32)),
		Trust: inForce.Load})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	s := &site{url: srv.URL, store: st}
	c := client(t)
	s.login(t, c)
	keyID := provenance.KeyID(signer.Public())

	want := map[int64]struct{ short, long string }{
		verified:  {"verified (ci-2026)", `verified: signed by ci-2026 (` + keyID + `), trust rule "prod" (require: signed)`},
		unsigned:  {"unsigned", "unsigned: the release is not signed"},
		edited:    {"broken: metadata_mismatch", `broken: metadata_mismatch: its metadata shows author "mallory"`},
		untrusted: {"broken: unknown_key", "broken: unknown_key: signed by SHA256:"},
	}
	timeline := func() map[int64]string {
		t.Helper()
		before := tb.Requests.Load()
		a := get(t, c, s.url+"/ui/apps/prod/web/-/releases")
		if a.status != 200 {
			t.Fatalf("timeline: %d\n%s", a.status, pageText(a.body))
		}
		if n := tb.Requests.Load() - before; n > 2 {
			t.Errorf("the timeline of %d releases cost %d bucket requests, want the head and one listing at most", len(want), n)
		}
		rows := map[int64]string{}
		for _, row := range strings.Split(a.body, `<tr class="release">`)[1:] {
			var gen int64
			fmt.Sscan(regexp.MustCompile(`releases/(\d+)"`).FindStringSubmatch(row)[1], &gen)
			rows[gen] = html.UnescapeString(row)
		}
		return rows
	}
	rows := timeline()
	for gen, w := range want {
		if !strings.Contains(rows[gen], ">"+w.short+"</td>") || !strings.Contains(rows[gen], `title="`+w.long) {
			t.Errorf("the timeline's row of %d says\n%s\nwant %q, titled %q", gen, rows[gen], w.short, w.long)
		}
	}
	if n := timeline(); len(n) != len(want) {
		t.Errorf("the timeline again: %d rows", len(n))
	}

	// The release page checks the bytes too.
	for gen, w := range want {
		a := get(t, c, fmt.Sprintf("%s/ui/apps/prod/web/-/releases/%d", s.url, gen))
		m := regexp.MustCompile(`id="signature" class="signature sig-(\w+)">([^<]*)<`).FindStringSubmatch(a.body)
		if m == nil || !strings.HasPrefix(html.UnescapeString(m[2]), w.long) {
			t.Errorf("the release page of %d says %q, want %q", gen, m, w.long)
		}
		if gen == verified && !strings.Contains(m[2], "the bytes match the signed digest") {
			t.Errorf("the release page of %d doesn't say the bytes were checked: %q", gen, m[2])
		}
	}

	// The activity export, as CSV and JSON.
	a := get(t, c, s.url+"/ui/activity?prefix=prod/web&format=csv")
	records, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
	if err != nil || len(records) != len(want)+1 {
		t.Fatalf("CSV (%v): %q", err, records)
	}
	col := map[string]int{}
	for i, name := range records[0] {
		col[name] = i
	}
	for _, r := range records[1:] {
		var gen int64
		fmt.Sscan(r[col["generation"]], &gen)
		got := strings.Join([]string{r[col["signature"]], r[col["signature_key"]], r[col["signature_key_id"]], r[col["signature_rule"]], r[col["signature_problem"]]}, "|")
		wantCSV := map[int64]string{
			verified:  "verified|ci-2026|" + keyID + `|trust rule "prod" (require: signed)|`,
			unsigned:  `unsigned|||trust rule "prod" (require: signed)|missing_signature`,
			edited:    `broken|ci-2026|` + keyID + `|trust rule "prod" (require: signed)|metadata_mismatch`,
			untrusted: `broken|||trust rule "prod" (require: signed)|unknown_key`,
		}[gen]
		if got != wantCSV {
			t.Errorf("CSV row of %d: %s, want %s", gen, got, wantCSV)
		}
	}
	var out struct {
		Releases []struct {
			Generation int64
			Signature  struct {
				State, Key, Problem string
				KeyID               string `json:"key_id"`
				Rule                struct{ Prefix, Require string }
			}
		}
	}
	a = get(t, c, s.url+"/ui/activity?prefix=prod/web&format=json")
	if err := json.Unmarshal([]byte(a.body), &out); err != nil || len(out.Releases) != len(want) {
		t.Fatalf("JSON (%v): %s", err, a.body)
	}
	for _, r := range out.Releases {
		sig := r.Signature
		got := sig.State + " " + sig.Problem
		w := map[int64]string{verified: "verified ", unsigned: "unsigned missing_signature", edited: "broken metadata_mismatch", untrusted: "broken unknown_key"}[r.Generation]
		if got != w || sig.Rule.Prefix != "prod" || (sig.State == "verified" && sig.KeyID != keyID) {
			t.Errorf("JSON release %d: %+v, want %s under the rule prod", r.Generation, sig, w)
		}
	}

	// A reload that trusts the other key instead: the verdicts kept for the
	// old policy are not reused.
	otherPub, err := provenance.MarshalPublicKey(otherPriv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := provenance.ParseTrustPolicy(t.Context(), []byte("keys:\n  other: |\n    "+strings.ReplaceAll(strings.TrimSpace(string(otherPub)), "\n", "\n    ")+
		"\nrules:\n  - {prefix: prod, require: signed, keys: [other]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	inForce.Store(rotated)
	rows = timeline()
	for gen, w := range map[int64]string{verified: ">broken: unknown_key</td>", untrusted: ">verified (other)</td>"} {
		if !strings.Contains(rows[gen], w) {
			t.Errorf("after the policy trusts the other key, the timeline's row of %d says\n%s\nwant %s", gen, rows[gen], w)
		}
	}

	// A reload that leaves no policy: nothing is judged, and the pages say so.
	inForce.Store(nil)
	for gen, row := range timeline() {
		if !strings.Contains(row, ">not checked</td>") || !strings.Contains(row, "the bridge has no trust policy") {
			t.Errorf("without a trust policy, the timeline's row of %d says\n%s", gen, row)
		}
	}
	a = get(t, c, fmt.Sprintf("%s/ui/apps/prod/web/-/releases/%d", s.url, verified))
	if !strings.Contains(a.body, "not checked: the bridge has no trust policy") {
		t.Errorf("without a trust policy, the release page says:\n%s", pageText(a.body))
	}
	a = get(t, c, s.url+"/ui/activity?prefix=prod/web&format=csv")
	if n := strings.Count(a.body, ",not_checked,"); n != len(want) {
		t.Errorf("without a trust policy, %d CSV rows say not_checked:\n%s", n, a.body)
	}
}
