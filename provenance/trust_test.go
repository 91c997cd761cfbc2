package provenance_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/provenance/kmstest"
)

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

func TestTrustPolicy(t *testing.T) {
	_, oldPub := keyFiles(t)
	_, newPub := keyFiles(t)
	oldPEM, _ := os.ReadFile(oldPub)
	newPEM, _ := os.ReadFile(newPub)
	fake := kmstest.Start(t)
	const version = "projects/p/locations/global/keyRings/ci/cryptoKeys/releases/cryptoKeyVersions/3"
	kmsPub := fake.AddKey(version)
	k := &provenance.KMS{Options: fake.ClientOptions()}
	t.Cleanup(func() { k.Close() })

	doc := fmt.Sprintf(`keys:
  ci-2025: |
%s
  ci-2026: |
%s
  ci-kms: gcpkms://%s
rules:
  - prefix: prod
    require: signed
    keys: [ci-2025, ci-2026]
  - prefix: prod/payments
    require: signed
    keys: [ci-kms]
  - prefix: ""
    require: warn
    keys: [ci-2026]
  - prefix: sandbox/
    require: "off"
`, indent(string(oldPEM)), indent(string(newPEM)), version)
	p, err := provenance.ParseTrustPolicy(t.Context(), []byte(doc), k)
	if err != nil {
		t.Fatal(err)
	}
	for app, want := range map[string]string{"prod/api": "prod signed 2", "prod/payments/eu": "prod/payments signed 1", "production/x": " warn 1", "sandbox/x": "sandbox off 0"} {
		r, ok := p.RuleFor(app)
		if !ok {
			t.Errorf("%s: no rule", app)
			continue
		}
		if got := fmt.Sprintf("%s %s %d", r.Prefix, r.Require, r.Keys().Len()); got != want {
			t.Errorf("%s: rule %q, want %q", app, got, want)
		}
	}
	if r, _ := p.RuleFor("prod/payments"); r.Keys().Len() != 1 || !trustsKey(r, kmsPub) {
		t.Error("the KMS key's public key is not the one the rule trusts")
	}

	for name, tc := range map[string]struct{ doc, want string }{
		"no rules":            {"keys: {}\n", "no rules"},
		"unknown field":       {"rules:\n  - prefix: a\n    require: signed\n    key: [x]\n", `unknown field "key": did you mean "keys"?`},
		"unknown key name":    {"keys: {}\nrules:\n  - prefix: a\n    require: signed\n    keys: [ci]\n", `key "ci" is not one of the policy's keys`},
		"signed without keys": {"rules:\n  - prefix: a\n    require: signed\n", "require signed but no keys"},
		"bad require":         {"rules:\n  - prefix: a\n    require: always\n", `require "always": say signed, warn or off`},
		"no require":          {"rules:\n  - prefix: a\n", "no require"},
		"same prefix twice":   {"rules:\n  - {prefix: a, require: \"off\"}\n  - {prefix: a/, require: \"off\"}\n", "same prefix"},
		"private key":         {"keys:\n  ci: |\n    -----BEGIN PRIVATE KEY-----\n    MC4CAQAwBQYDK2VwBCIEIA==\n    -----END PRIVATE KEY-----\nrules:\n  - {prefix: a, require: \"off\"}\n", "this is a private key"},
		"a key not a version": {"keys:\n  ci: gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k\nrules:\n  - {prefix: a, require: \"off\"}\n", "cryptoKeyVersions/N"},
		"unknown KMS key":     {"keys:\n  ci: gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/9\nrules:\n  - {prefix: a, require: \"off\"}\n", "NotFound"},
	} {
		_, err := provenance.ParseTrustPolicy(t.Context(), []byte(tc.doc), k)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func trustsKey(r *provenance.TrustRule, pub []byte) bool {
	return r.Keys().Trusts(provenance.KeyID(pub))
}
