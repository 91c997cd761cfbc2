package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/bucketops/bucketops/policy/watch"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

// trustPolicy requires signatures by key ci under prod, warns under
// staging, and leaves sandbox alone.
func trustPolicy(t *testing.T, pub ed25519.PublicKey) string {
	t.Helper()
	pemPub, err := provenance.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`keys:
  ci: |
    %s
rules:
  - prefix: prod
    require: signed
    keys: [ci]
  - prefix: staging
    require: warn
    keys: [ci]
  - prefix: sandbox
    require: "off"
`, strings.ReplaceAll(strings.TrimSpace(string(pemPub)), "\n", "\n    "))
	name := filepath.Join(t.TempDir(), "trust.yaml")
	if err := os.WriteFile(name, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestPluginRefusesUntrustedReleases: under require: signed, each way of
// tampering with a signed history reaches Argo CD as a one-line error and
// no manifests, through the plugin and the bridge as they run.
func TestPluginRefusesUntrustedReleases(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := provenance.NewKeySigner(priv)
	reg := prometheus.NewRegistry()
	var bucket *storetest.Bucket
	st, bucket := startAPIWith(t, func(c *webhook.Config) {
		w, err := watch.New("trust", trustPolicy(t, signer.Public()), provenance.TrustParser(t.Context(), nil), slog.New(slog.DiscardHandler), reg)
		if err != nil {
			t.Fatal(err)
		}
		c.Trust, c.Registry = w, reg
	})
	push := func(app, value string, s provenance.Signer) store.Release {
		t.Helper()
		rel, err := render.AssembleStream("stdin", strings.NewReader(configMap("a", value)))
		if err != nil {
			t.Fatal(err)
		}
		p := store.Publication{Data: rel.Bytes, Resources: rel.Resources(), Author: "ci"}
		if s != nil {
			p.Sign = provenance.Sign(s)
		}
		res, err := st.Publish(t.Context(), app, p)
		if err != nil {
			t.Fatal(err)
		}
		return res.Release
	}
	history := func(app string) []store.Release {
		var out []store.Release
		for i := range 3 {
			out = append(out, push(app, fmt.Sprint(i), signer))
		}
		return out
	}
	object := func(app string) string { return app + "/manifests.yaml" }

	// What verifies is served.
	history("prod/good")
	t.Setenv("PARAM_APP", "prod/good")
	if out := bucketops(t, "", "plugin", "generate").must(t); !strings.Contains(out.stdout, `value: "2"`) {
		t.Errorf("a signed release printed %q", out.stdout)
	}

	_, otherPriv, _ := ed25519.GenerateKey(nil)
	// Each refusal is one line naming the release, the rule, what to do
	// and the reason: what Argo CD shows in the Application's condition.
	cases := []struct {
		app    string
		tamper func(app string, hist []store.Release)
		// code is the bracketed reason; says, what the line says.
		code string
		says []string
	}{
		{"prod/unsigned", func(app string, _ []store.Release) { push(app, "evil", nil) }, "untrusted_release: missing_signature",
			[]string{`not signed, and trust rule "prod" accepts only releases signed by its keys; publish it signed: bucketops push prod/unsigned DIR --sign-key KEY`}},
		{"prod/other-key", func(app string, _ []store.Release) { push(app, "evil", provenance.NewKeySigner(otherPriv)) }, "untrusted_release: unknown_key",
			[]string{`not signed by a key that trust rule "prod" accepts (signed by ` + provenance.KeyID(otherPriv.Public().(ed25519.PublicKey)) + `)`, "--sign-key KEY", "add the key to the rule if it is yours"}},
		{"prod/bad-sig", func(app string, _ []store.Release) {
			var env dsse.Envelope
			json.Unmarshal([]byte(bucket.Attrs(t, object(app), 0).Metadata["bucketops-signature"]), &env)
			sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
			sig[5] ^= 0x40
			env.Signatures[0].Sig = base64.StdEncoding.EncodeToString(sig)
			out, _ := json.Marshal(env)
			bucket.EditMetadata(t, object(app), "bucketops-signature", string(out))
		}, "untrusted_release: bad_signature", []string{`its signature doesn't verify with the keys of trust rule "prod"`, "publish it signed: bucketops push prod/bad-sig DIR --sign-key KEY"}},
		{"prod/rewritten", func(app string, _ []store.Release) {
			bucket.Rewrite(t, object(app), []byte(configMap("a", "evil")))
		}, "digest_mismatch", []string{"the stored bytes don't match the release's bucketops-digest", "bucketops rollback prod/rewritten --to GEN"}},
		{"prod/redigested", func(app string, _ []store.Release) {
			evil := []byte(configMap("a", "evil"))
			bucket.Rewrite(t, object(app), evil)
			bucket.EditMetadata(t, object(app), "bucketops-digest", store.Digest(evil))
			bucket.EditMetadata(t, object(app), "bucketops-size", fmt.Sprint(len(evil)))
		}, "untrusted_release: metadata_mismatch", []string{`not what was signed, so trust rule "prod" refuses it`, "--sign-key KEY"}},
		{"prod/edited", func(app string, _ []store.Release) {
			bucket.EditMetadata(t, object(app), "bucketops-origin", "prod/x@1")
		}, "untrusted_release: metadata_mismatch", []string{`not what was signed, so trust rule "prod" refuses it`, "origin"}},
		{"prod/gap", func(app string, hist []store.Release) { bucket.DeleteGeneration(t, object(app), hist[1].Generation) },
			"untrusted_release: gap", []string{`its signed history is broken, so trust rule "prod" refuses it`, "is gone from the history", "publish a new signed release on top of the head (bucketops push prod/gap DIR --sign-key KEY)"}},
		{"prod/replayed", func(app string, hist []store.Release) {
			bucket.CopyObject(t, object(app), hist[0].Generation, object(app))
		}, "untrusted_release: fork", []string{`its signed history is broken, so trust rule "prod" refuses it`, "publish a new signed release on top of the head"}},
		{"prod/planted", func(app string, _ []store.Release) { bucket.CopyObject(t, object("prod/good"), 0, object(app)) },
			"untrusted_release: wrong_app", []string{`trust rule "prod" refuses it: the statement was signed for prod/good`, "bucketops promote SRC prod/planted --sign-key KEY"}},
	}
	for _, c := range cases {
		t.Run(c.app, func(t *testing.T) {
			c.tamper(c.app, history(c.app))
			head, err := st.Head(t.Context(), c.app)
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("PARAM_APP", c.app)
			r := bucketops(t, "", "plugin", "generate")
			if r.code == 0 || r.stdout != "" {
				t.Fatalf("exit %d with stdout %q; want a failure and nothing on stdout", r.code, r.stdout)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if strings.Contains(line, "\n") {
				t.Errorf("stderr is not one line: %q", r.stderr)
			}
			if want := "bucketops: " + head.Ref().String() + ": "; !strings.HasPrefix(line, want) {
				t.Errorf("the line doesn't start with %q: %s", want, line)
			}
			if want := " [" + c.code + "]"; !strings.HasSuffix(line, want) {
				t.Errorf("the line doesn't end with %q: %s", want, line)
			}
			for _, w := range c.says {
				if !strings.Contains(line, w) {
					t.Errorf("the line doesn't say %q: %s", w, line)
				}
			}
		})
	}
	if n := untrusted(t, reg, "missing_signature", "refused"); n != 1 {
		t.Errorf("bucketops_untrusted_releases_total{problem=missing_signature,action=refused} = %v, want 1", n)
	}

	// warn serves and counts; off serves; an app no rule covers is refused.
	push("staging/web", "1", nil)
	t.Setenv("PARAM_APP", "staging/web")
	bucketops(t, "", "plugin", "generate").must(t)
	if n := untrusted(t, reg, "missing_signature", "served"); n != 1 {
		t.Errorf("warned renders counted %v, want 1", n)
	}
	push("sandbox/web", "1", nil)
	t.Setenv("PARAM_APP", "sandbox/web")
	bucketops(t, "", "plugin", "generate").must(t)
	push("dev/web", "1", nil)
	t.Setenv("PARAM_APP", "dev/web")
	if r := bucketops(t, "", "plugin", "generate"); r.code == 0 || !strings.Contains(r.stderr, "no rule of the trust policy covers this app") {
		t.Errorf("an app no trust rule covers: exit %d %s", r.code, r.stderr)
	}
}

// untrusted reads bucketops_untrusted_releases_total{problem, action}.
func untrusted(t *testing.T, reg *prometheus.Registry, problem, action string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "bucketops_untrusted_releases_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["problem"] == problem && labels["action"] == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
