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
