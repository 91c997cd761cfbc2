package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/emulator"
	"github.com/bucketops/bucketops/provenance/kmstest"
)

func gcs(t *testing.T, emu *emulator.Emulator) *storage.BucketHandle {
	t.Helper()
	client, err := storage.NewClient(t.Context(), option.WithEndpoint(emu.URL()+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client.Bucket(emu.Bucket())
}

// TestSignVerifyRoundTrip is the newcomer's path through docs/signing.md:
// keygen, push and promote signed, verify; then what tampering looks like.
func TestSignVerifyRoundTrip(t *testing.T) {
	emu := startBucket(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "ci-2026")
	out := bucketops(t, "", "keygen", "--out", key).must(t)
	if !strings.Contains(out.stdout, "key id SHA256:") {
		t.Errorf("keygen printed %q", out.stdout)
	}
	if info, err := os.Stat(key + ".key"); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("private key file: %v, mode %v, want 0600", err, info.Mode())
	}
	if r := bucketops(t, "", "keygen", "--out", key); r.code != exitInvalid || !strings.Contains(r.stderr, "never overwrites") {
		t.Errorf("keygen over an existing key: exit %d %s", r.code, r.stderr)
	}

	files := writeFiles(t, map[string]string{"cm.yaml": configMap("web", "1")})
	bucketops(t, "", "push", "staging/web", files, "--sign-key", key+".key", "--sequence", "1").must(t)
	t.Setenv("BUCKETOPS_SIGNING_KEY", key+".key")
	bucketops(t, "", "push", "staging/web", writeFiles(t, map[string]string{"cm.yaml": configMap("web", "2")}), "--sequence", "2").must(t)
	bucketops(t, "", "promote", "staging/web", "prod/web", "--sequence", "2").must(t)
	t.Setenv("BUCKETOPS_SIGNING_KEY", "")

	ok := bucketops(t, "", "verify", "prod/web", "--key", key+".pub").must(t)
	if !strings.Contains(ok.stdout, "ok") || !strings.Contains(ok.stdout, "signed by "+key+".pub") {
		t.Errorf("verify printed %q", ok.stdout)
	}
	chain := decode[verifyOutput](t, bucketops(t, "", "verify", "staging/web", "--chain", "--key", key+".pub", "-o", "json").must(t).stdout)
	if chain.Releases != 2 || chain.Problems != 0 || len(chain.Findings) != 2 || !strings.HasPrefix(chain.Findings[1].KeyID, "SHA256:") {
		t.Errorf("verify --chain -o json: %+v", chain)
	}

	// An unsigned release, then an edited author: exit 6, each named.
	bucketops(t, "", "push", "staging/web", writeFiles(t, map[string]string{"cm.yaml": configMap("web", "3")}), "--sequence", "3").must(t)
	r := bucketops(t, "", "verify", "staging/web", "--key", key+".pub")
	if r.code != exitUnverified || !strings.Contains(r.stdout, "missing_signature") {
		t.Errorf("unsigned head: exit %d, %q", r.code, r.stdout)
	}
	obj := gcs(t, emu).Object("prod/web/manifests.yaml")
	if _, err := obj.Update(t.Context(), storage.ObjectAttrsToUpdate{Metadata: map[string]string{"bucketops-author": "mallory"}}); err != nil {
		t.Fatal(err)
	}
	r = bucketops(t, "", "verify", "prod/web", "--chain", "--key", key+".pub")
	if r.code != exitUnverified || !strings.Contains(r.stdout, "metadata_mismatch") || !strings.Contains(r.stdout, `author "mallory"`) || !strings.Contains(r.stdout, "1 did not verify") {
		t.Errorf("edited author: exit %d, %q", r.code, r.stdout)
	}

	// The trust policy the bridge reads serves verify too.
	pub, _ := os.ReadFile(key + ".pub")
	policy := filepath.Join(dir, "trust.yaml")
	os.WriteFile(policy, []byte("keys:\n  ci-2026: |\n    "+strings.ReplaceAll(strings.TrimSpace(string(pub)), "\n", "\n    ")+"\nrules:\n  - prefix: staging\n    require: signed\n    keys: [ci-2026]\n"), 0o644)
	if r := bucketops(t, "", "verify", fmt.Sprintf("staging/web@%d", chain.Findings[1].Generation), "--trust-policy", policy); r.code != 0 {
		t.Errorf("verify with the trust policy: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := bucketops(t, "", "verify", "prod/web", "--trust-policy", policy); r.code != exitInvalid || !strings.Contains(r.stderr, "no rule covers prod/web") {
		t.Errorf("an app the trust policy doesn't cover: exit %d %s", r.code, r.stderr)
	}
}

func TestSigningBadInput(t *testing.T) {
	startBucket(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	bucketops(t, "", "keygen", "--out", key).must(t)
	files := writeFiles(t, map[string]string{"cm.yaml": configMap("web", "1")})
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"public key to sign":  {[]string{"push", "a/b", files, "--sign-key", key + ".pub"}, "not a PEM \"PRIVATE KEY\""},
		"missing key file":    {[]string{"push", "a/b", files, "--sign-key", key + ".nope"}, "no such file"},
		"KMS key not version": {[]string{"push", "a/b", files, "--sign-key", "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k"}, "cryptoKeyVersions/N"},
		"message too long":    {[]string{"push", "a/b", files, "--sign-key", key + ".key", "-m", strings.Repeat("x", 3000)}, "the limit for a signed release is 2560"},
		"verify without keys": {[]string{"verify", "a/b"}, "--key FILE"},
		"verify private key":  {[]string{"verify", "a/b", "--key", key + ".key"}, "this is a private key"},
		"chain and gen":       {[]string{"verify", "a/b@12", "--chain", "--key", key + ".pub"}, "leave out @12"},
	} {
		r := bucketops(t, "", tc.args...)
		if r.code != exitInvalid || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d %q, want exit 2 saying %q", name, r.code, r.stderr, tc.want)
		}
	}
	if r := bucketops(t, "", "ls"); strings.Contains(r.stdout, "a/b") {
		t.Errorf("a refused signed push wrote something: %s", r.stdout)
	}
}

func TestSignWithCloudKMS(t *testing.T) {
	startBucket(t)
	fake := kmstest.Start(t)
	kmsClientOptions = fake.ClientOptions()
	t.Cleanup(func() { kmsClientOptions = nil })
	const version = "projects/p/locations/global/keyRings/ci/cryptoKeys/releases/cryptoKeyVersions/1"
	fake.AddKey(version)
	files := writeFiles(t, map[string]string{"cm.yaml": configMap("web", "1")})
	bucketops(t, "", "push", "prod/web", files, "--sign-key", "gcpkms://"+version).must(t)
	bucketops(t, "", "verify", "prod/web", "--key", "gcpkms://"+version).must(t)
	if fake.Signs() != 1 {
		t.Errorf("%d KMS signatures for one push", fake.Signs())
	}
	fake.Deny(version)
	r := bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("web", "2")}), "--sign-key", "gcpkms://"+version)
	if r.code != exitFailure || !strings.Contains(r.stderr, "PermissionDenied") || !strings.Contains(r.stderr, "roles/cloudkms.signerVerifier") {
		t.Errorf("a key CI may not use: exit %d %q", r.code, r.stderr)
	}
}

// TestLogAndShowSignatures: log and show say of each release whether its
// signature verified (by which key, under which trust rule), is missing,
// or is broken (which check failed), judged as the bridge judges it, and
// "not checked" when given no keys.
func TestLogAndShowSignatures(t *testing.T) {
	emu := startBucket(t)
	dir := t.TempDir()
	key, other := filepath.Join(dir, "ci-2026"), filepath.Join(dir, "intruder")
	bucketops(t, "", "keygen", "--out", key).must(t)
	bucketops(t, "", "keygen", "--out", other).must(t)
	pub, _ := os.ReadFile(key + ".pub")
	policy := filepath.Join(dir, "trust.yaml")
	os.WriteFile(policy, []byte("keys:\n  ci-2026: |\n    "+strings.ReplaceAll(strings.TrimSpace(string(pub)), "\n", "\n    ")+"\nrules:\n  - prefix: prod\n    require: signed\n    keys: [ci-2026]\n"), 0o644)
	push := func(v string, args ...string) string {
		t.Helper()
		files := writeFiles(t, map[string]string{"cm.yaml": configMap("web", v)})
		out := decode[map[string]any](t, bucketops(t, "", append([]string{"push", "prod/web", files, "-o", "json"}, args...)...).must(t).stdout)
		return fmt.Sprint(int64(out["generation"].(float64)))
	}
	verified := push("1", "--sign-key", key+".key")
	unsigned := push("2")
	edited := push("3", "--sign-key", key+".key")
	if _, err := gcs(t, emu).Object("prod/web/manifests.yaml").Update(t.Context(), storage.ObjectAttrsToUpdate{Metadata: map[string]string{"bucketops-author": "mallory"}}); err != nil {
		t.Fatal(err)
	}
	untrusted := push("4", "--sign-key", other+".key")

	want := map[string]string{ // by generation, as log's table says it
		verified:  "verified (" + key + ".pub)",
		unsigned:  "unsigned",
		edited:    "broken: metadata_mismatch",
		untrusted: "broken: unknown_key",
	}
	for _, args := range [][]string{{"--key", key + ".pub"}, {"--key", key + ".pub", "--commits=false"}} {
		text := bucketops(t, "", append([]string{"log", "prod/web"}, args...)...).must(t).stdout
		if !strings.Contains(text, "SIGNATURE") {
			t.Errorf("log %v has no SIGNATURE column:\n%s", args, text)
		}
		for gen, w := range want {
			if line := lineWith(text, gen); !strings.Contains(line, w) {
				t.Errorf("log %v: release %s reads %q, want %q", args, gen, line, w)
			}
		}
	}
	type logged struct {
		Generation int64
		Signature  struct {
			State, Key, Problem, Detail string
			KeyID                       string `json:"key_id"`
			Rule                        *struct{ Prefix, Require string }
		}
	}
	rows := decode[[]logged](t, bucketops(t, "", "log", "prod/web", "--trust-policy", policy, "-o", "json").must(t).stdout)
	states := map[string]string{}
	for _, r := range rows {
		s := r.Signature
		states[fmt.Sprint(r.Generation)] = s.State + " " + s.Problem
		if s.Rule == nil || s.Rule.Prefix != "prod" || s.Rule.Require != "signed" {
			t.Errorf("log -o json: release %d judged under %+v, want the trust rule prod", r.Generation, s.Rule)
		}
		if s.State == "verified" && (s.Key != "ci-2026" || !strings.HasPrefix(s.KeyID, "SHA256:")) {
			t.Errorf("log -o json: release %d verified by %q (%s)", r.Generation, s.Key, s.KeyID)
		}
	}
	for gen, w := range map[string]string{verified: "verified ", unsigned: "unsigned missing_signature", edited: "broken metadata_mismatch", untrusted: "broken unknown_key"} {
		if states[gen] != w {
			t.Errorf("log -o json: release %s is %q, want %q", gen, states[gen], w)
		}
	}

	// Without keys, nothing is judged: never a guess.
	text := bucketops(t, "", "log", "prod/web").must(t).stdout
	if strings.Count(text, "not checked") != 4 || strings.Contains(text, "verified") || strings.Contains(text, "unsigned") {
		t.Errorf("log without keys:\n%s", text)
	}
	for _, r := range decode[[]logged](t, bucketops(t, "", "log", "prod/web", "-o", "json", "--limit", "1", "--commits=false").must(t).stdout) {
		if r.Signature.State != "not_checked" {
			t.Errorf("log -o json without keys: %+v", r.Signature)
		}
	}

	// show: the whole line, the bytes checked too.
	for _, tc := range []struct {
		ref  string
		args []string
		want string
	}{
		{"prod/web@" + verified, []string{"--trust-policy", policy}, `signature: verified: signed by ci-2026 (SHA256:`},
		{"prod/web@" + verified, []string{"--trust-policy", policy}, `trust rule "prod" (require: signed); the bytes match the signed digest`},
		{"prod/web@" + unsigned, []string{"--key", key + ".pub"}, "signature: unsigned: the release is not signed"},
		{"prod/web@" + edited, []string{"--key", key + ".pub"}, `signature: broken: metadata_mismatch: its metadata shows author "mallory"`},
		{"prod/web", []string{"--trust-policy", policy}, `signature: broken: unknown_key: signed by SHA256:`},
		{"prod/web", nil, "signature: not checked: no --key or --trust-policy given"},
	} {
		out := bucketops(t, "", append([]string{"show", tc.ref}, tc.args...)...).must(t).stdout
		if !strings.Contains(strings.Join(strings.Fields(out), " "), tc.want) {
			t.Errorf("show %s %v lacks %q:\n%s", tc.ref, tc.args, tc.want, out)
		}
	}
	type shown struct {
		Signature struct {
			State, Key, Problem string
			KeyID               string `json:"key_id"`
			BytesChecked        bool   `json:"bytes_checked"`
		}
	}
	if s := decode[shown](t, bucketops(t, "", "show", "prod/web@"+verified, "--key", key+".pub", "-o", "json").must(t).stdout).Signature; s.State != "verified" || !s.BytesChecked || !strings.HasPrefix(s.KeyID, "SHA256:") {
		t.Errorf("show -o json of a verified release: %+v", s)
	}
	if s := decode[shown](t, bucketops(t, "", "show", "prod/web@"+edited, "--key", key+".pub", "-o", "json").must(t).stdout).Signature; s.State != "broken" || s.Problem != "metadata_mismatch" {
		t.Errorf("show -o json of an edited release: %+v", s)
	}
	if s := decode[shown](t, bucketops(t, "", "show", "prod/web", "-o", "json").must(t).stdout).Signature; s.State != "not_checked" {
		t.Errorf("show -o json without keys: %+v", s)
	}

	for _, args := range [][]string{
		{"log", "prod/web", "--key", key + ".pub", "--trust-policy", policy},
		{"show", "prod/web", "--raw", "--key", key + ".pub"},
	} {
		if r := bucketops(t, "", args...); r.code != exitInvalid {
			t.Errorf("%v: exit %d %s, want 2", args, r.code, r.stderr)
		}
	}
}

// lineWith returns the first line of text holding s.
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
