package render_test

import (
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
)

func TestRedactedHidesEverySecretValue(t *testing.T) {
	ids := newAgeKeys(t, 1)
	encrypted := string(encryptSecret(t, dbSecret, recipientsOf(ids...)...))
	fully, _ := sopsEncrypt(t, dbSecret, "", recipientsOf(ids...)...)
	plain := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: plain\n  namespace: pay\nstringData:\n  password: hunter2 # the real one\n  again: hunter2\ndata:\n  token: aHVudGVyMg==\n"
	rel, err := render.AssembleStream("r.yaml", strings.NewReader(encrypted+"---\n"+string(fully)+"---\n"+plain+"---\n"+settings))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rel.Objects {
		out := string(o.Redacted())
		for _, leak := range []string{"hunter2", "aHVudGVyMg==", "postgres://db", "ENC["} {
			if strings.Contains(out, leak) {
				t.Errorf("%s shows %q:\n%s", o, leak, out)
			}
		}
		switch {
		case o.Kind == "ConfigMap":
			if out != string(o.Body) {
				t.Errorf("a ConfigMap changed:\n%s", out)
			}
		case o.Encrypted:
			if !strings.Contains(out, "<redacted sha256:") || !strings.Contains(out, "sops:") {
				t.Errorf("%s:\n%s", o, out)
			}
		default:
			if strings.Count(out, "<redacted hmac:") != 3 {
				t.Errorf("plain Secret:\n%s", out)
			}
		}
	}
	// Equal plaintext values have equal marks, so a diff still shows which
	// value changed.
	redacted := rel.Objects[2].Redacted()
	lines := strings.Split(string(redacted), "\n")
	var pw, again string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "password: "); ok {
			pw = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "again: "); ok {
			again = v
		}
	}
	if pw == "" || pw != again {
		t.Errorf("equal values marked %q and %q", pw, again)
	}
}

func TestDiffObjectsRedactedSaysAValueChangedNeverWhich(t *testing.T) {
	secret := func(pw string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: pay\nstringData:\n  password: " + pw + "\n"
	}
	a, _ := render.AssembleStream("a.yaml", strings.NewReader(secret("old-s3cret")+"---\n"+settings))
	b, _ := render.AssembleStream("b.yaml", strings.NewReader(secret("new-s3cret")+"---\n"+api))
	changes, unchanged := render.DiffObjects("x@1", a.Objects, "x@2", b.Objects, render.Object.Redacted)
	if unchanged != 0 || len(changes) != 3 {
		t.Fatalf("%d unchanged, changes %+v", unchanged, changes)
	}
	kinds := map[string]string{}
	for _, c := range changes {
		kinds[c.Object] = c.Change
		if strings.Contains(c.Diff, "s3cret") {
			t.Errorf("the diff of %s shows a secret value:\n%s", c.Object, c.Diff)
		}
	}
	if kinds["Secret pay/s"] != render.Changed || kinds["ConfigMap pay/settings"] != render.Removed || kinds["Deployment pay/api"] != render.Added {
		t.Errorf("changes %v", kinds)
	}
	for _, c := range changes {
		if c.Object == "Secret pay/s" && (!strings.Contains(c.Diff, "-  password: <redacted hmac:") || !strings.Contains(c.Diff, "+  password: <redacted hmac:")) {
			t.Errorf("the Secret's diff doesn't show that the value changed:\n%s", c.Diff)
		}
	}
}

// Every scalar under a Secret's data and stringData is redacted once
// aliases and << merges are followed, and so are the values a partly
// encrypted Secret keeps in the clear (issue 24, item 6).
func TestRedactedHidesSecretValuesWhereverTheTextPutsThem(t *testing.T) {
	ids := newAgeKeys(t, 1)
	// sops encrypt --encrypted-regex '^password$': username stays in clear.
	partly, _ := sopsEncrypt(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: partly\n  namespace: pay\nstringData:\n  username: admin-s3cret\n  password: hunter2\n", "^password$", recipientsOf(ids...)...)
	// Fully encrypted but for a key sops leaves alone: the kind can't be
	// read, so its data is treated as a Secret's.
	suffixed, _ := sopsEncrypt(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: suffixed\nstringData:\n  token_unencrypted: s3cret-token\n", "", recipientsOf(ids...)...)
	const head = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: pay\n"
	for _, c := range []struct {
		name, doc string
		// keep must still show: keys and what isn't a value.
		keep []string
	}{
		{"a value merged into stringData with <<", head + "stringData:\n  <<: {password: hunter2}\n  user: admin\n", []string{"password:", "user:", "name: s"}},
		{"values merged into data from a list of mappings", head + "data:\n  <<: [{a: aHVudGVyMg==}, {b: czNjcmV0LXRva2Vu}]\n", []string{"a:", "b:"}},
		{"a stringData merged in at the top level", head + "<<: {stringData: {password: hunter2}}\n", []string{"password:"}},
		{"a stringData that a merged one is overridden by", head + "<<: {stringData: {password: hunter2}}\nstringData: {user: admin-s3cret}\n", []string{"password:", "user:"}},
		{"a value that is an alias to an anchor outside data", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  annotations: {note: &pw hunter2}\nstringData:\n  password: *pw\n", []string{"note:", "password: *pw"}},
		{"a data that is an alias to a mapping", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  labels: &creds {password: hunter2}\nstringData: *creds\n", []string{"stringData: *creds"}},
		{"a value behind a merge of a merge", head + "stringData:\n  <<: {<<: {password: hunter2}}\n", []string{"password:"}},
		{"values in a comment and in a nested list", head + "stringData:\n  # the old one was admin-s3cret\n  password: hunter2 # yes, hunter2\n  list: [hunter2, {x: s3cret-token}]\n", []string{"password:", "list:"}},
		{"a clear value of a Secret encrypted with encrypted_regex ^password$", string(partly), []string{"username:", "password:", "sops:", "encrypted_regex: ^password$"}},
		{"a value sops leaves in clear in a document whose kind is encrypted", string(suffixed), []string{"token_unencrypted:", "sops:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel, err := render.AssembleStream("s.yaml", strings.NewReader(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			out := string(rel.Objects[0].Redacted())
			for _, leak := range []string{"hunter2", "aHVudGVyMg==", "czNjcmV0LXRva2Vu", "s3cret", "ENC["} {
				if strings.Contains(out, leak) {
					t.Errorf("shows %q:\n%s", leak, out)
				}
			}
			for _, k := range c.keep {
				if !strings.Contains(out, k) {
					t.Errorf("lacks %q:\n%s", k, out)
				}
			}
			if _, err := render.AssembleStream("redacted.yaml", strings.NewReader(out)); err != nil {
				t.Errorf("the redacted text is no longer a document: %v\n%s", err, out)
			}
		})
	}

	t.Run("a Secret's values are marked, a SOPS value by its ciphertext and a clear one by a keyed hash", func(t *testing.T) {
		rel, err := render.AssembleStream("s.yaml", strings.NewReader(string(partly)))
		if err != nil {
			t.Fatal(err)
		}
		out := string(rel.Objects[0].Redacted())
		if !strings.Contains(out, "username: <redacted hmac:") || !strings.Contains(out, "password: <redacted sha256:") {
			t.Errorf("marks:\n%s", out)
		}
	})
}
