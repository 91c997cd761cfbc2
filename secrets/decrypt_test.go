package secrets_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
)

func newDecrypter(t testing.TB, ids ...*age.X25519Identity) *secrets.Decrypter {
	t.Helper()
	d, err := secrets.NewDecrypter(keyFile(ids...))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRenderDecryptsSOPSDocumentsInMemory(t *testing.T) {
	ids := newAgeKeys(t, 2)
	d := newDecrypter(t, ids...)
	secret := encryptSecret(t, dbSecret, recipientsOf(ids[1])...)
	// Fully encrypted: its identity can only be read once decrypted.
	opaque, _ := sopsEncrypt(t, strings.ReplaceAll(dbSecret, "name: db", "name: opaque"), "", recipientsOf(ids[0])...)
	data := releaseStream(
		relDoc{Source: "app.yaml", Body: settings},
		relDoc{Source: "app.yaml", Body: api},
		relDoc{Source: "secrets/db.yaml", Body: string(secret)},
		relDoc{Source: "secrets/opaque.yaml", Body: string(opaque)},
	)

	out, err := renderBytes(d, data, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Source: app.yaml\n" + settings +
		"---\n# Source: app.yaml\n" + api +
		"---\n# Source: secrets/db.yaml\n" +
		"apiVersion: v1\nkind: Secret\nmetadata:\n    name: db\n    namespace: pay\ntype: Opaque\nstringData:\n    password: hunter2\n    url: postgres://db:5432/pay\n" +
		"---\n# Source: secrets/opaque.yaml\n" +
		"apiVersion: v1\nkind: Secret\nmetadata:\n    name: opaque\n    namespace: pay\ntype: Opaque\nstringData:\n    password: hunter2\n    url: postgres://db:5432/pay\n"
	if string(out) != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", out, want)
	}
	for i := range 3 {
		again, err := renderBytes(d, data, false)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("render %d differs from the first: %v\n%s", i+2, err, again)
		}
	}
	// What Argo CD gets is itself a valid release: nothing left encrypted.
	rel, err := render.Parse(out)
	if err != nil {
		t.Fatalf("the rendered stream doesn't parse: %v", err)
	}
	var names []string
	for _, o := range rel.Objects {
		if o.Encrypted {
			t.Errorf("%s is still encrypted", o)
		}
		names = append(names, o.String())
	}
	if got := strings.Join(names, ", "); got != "ConfigMap pay/settings, Deployment pay/api, Secret pay/db, Secret pay/opaque" {
		t.Errorf("objects: %s", got)
	}
}

func TestRenderKeepsValuesSOPSCanEndADocumentWith(t *testing.T) {
	ids := newAgeKeys(t, 1)
	// A |+ block scalar keeps its trailing blank lines, which a release
	// otherwise trims from the end of a document.
	plain := dbSecret + "  ca.crt: |+\n    -----BEGIN CERTIFICATE-----\n    MIIB\n    -----END CERTIFICATE-----\n\n\n"
	out, err := renderBytes(newDecrypter(t, ids...), releaseStream(relDoc{Source: "s.yaml", Body: string(encryptSecret(t, plain, recipientsOf(ids...)...))}), false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(out), "    ca.crt: |+\n        -----BEGIN CERTIFICATE-----\n        MIIB\n        -----END CERTIFICATE-----\n\n\n") {
		t.Errorf("the value lost its trailing line breaks:\n%q", out)
	}
}

// TestConcurrentRendersAreIsolated is the failure of seed 001: concurrent
// manifest generation through a plugin that decrypted into temporary files
// lost secret values. Renders share nothing but the Decrypter, and touch no
// file and no environment variable.
func TestConcurrentRendersAreIsolated(t *testing.T) {
	ids := newAgeKeys(t, 8)
	d := newDecrypter(t, ids...)

	// Keys can only come from the Decrypter: none from where sops looks.
	home, tmp, work := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("SOPS_AGE_KEY_FILE", "/nonexistent")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("TMPDIR", tmp)
	t.Chdir(work)
	env := os.Environ()

	releases := make([][]byte, len(ids))
	for i, id := range ids {
		var docs []relDoc
		for j := range 3 {
			plain := strings.ReplaceAll(dbSecret, "hunter2", fmt.Sprintf("release-%d-secret-%d", i, j))
			plain = strings.ReplaceAll(plain, "name: db", fmt.Sprintf("name: db-%d", j))
			docs = append(docs,
				relDoc{Source: fmt.Sprintf("cm-%d.yaml", j), Body: strings.ReplaceAll(settings, "name: settings", fmt.Sprintf("name: settings-%d", j))},
				relDoc{Source: fmt.Sprintf("secret-%d.yaml", j), Body: string(encryptSecret(t, plain, recipientsOf(id)...))})
		}
		releases[i] = releaseStream(docs...)
	}
	serial := make([][]byte, len(releases))
	for i, data := range releases {
		out, err := renderBytes(d, data, false)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if want := fmt.Sprintf("password: release-%d-secret-%d\n", i, j); !strings.Contains(string(out), want) {
				t.Fatalf("release %d renders without %q:\n%s", i, want, out)
			}
		}
		serial[i] = out
	}

	const goroutines, rounds = 64, 1
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds*len(releases))
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for r := range rounds * len(releases) {
				i := (g + r) % len(releases)
				out, err := renderBytes(d, releases[i], false)
				switch {
				case err != nil:
					errs <- fmt.Errorf("goroutine %d, release %d: %w", g, i, err)
				case !bytes.Equal(out, serial[i]):
					errs <- fmt.Errorf("goroutine %d, release %d: the output differs from the serial render:\n%s", g, i, out)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	for _, dir := range []string{tmp, work, home} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("rendering created %s in %s", entries[0].Name(), dir)
		}
	}
	if after := os.Environ(); !slices.Equal(after, env) {
		t.Errorf("rendering changed the environment")
	}
}

func TestKeysComeOnlyFromTheDecrypter(t *testing.T) {
	ids := newAgeKeys(t, 2)
	secret := encryptSecret(t, dbSecret, recipientsOf(ids[0])...)
	data := releaseStream(relDoc{Source: "secret.yaml", Body: string(secret)})

	// Every place sops itself would read age keys from holds the right one.
	home := t.TempDir()
	keys := filepath.Join(home, ".config", "sops", "age", "keys.txt")
	if err := os.MkdirAll(filepath.Dir(keys), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, keyFile(ids[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("SOPS_AGE_KEY_FILE", keys)
	t.Setenv("SOPS_AGE_KEY", ids[0].String())

	for name, d := range map[string]*secrets.Decrypter{
		"a decrypter with another key": newDecrypter(t, ids[1]),
		"a decrypter with no key":      newDecrypter(t),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderBytes(d, data, false)
			var de *secrets.DecryptError
			if !errors.As(err, &de) || de.Reason != secrets.ReasonNoKey {
				t.Fatalf("error %v, want no_key: the keys in the environment must not be used", err)
			}
		})
	}
}

func TestDecryptErrorSaysWhatWasTriedAndWhatIsHeld(t *testing.T) {
	ids := newAgeKeys(t, 3)
	r := recipientsOf(ids...)
	secret := encryptSecret(t, dbSecret, r[0], r[1])
	data := releaseStream(relDoc{Source: "secret.yaml", Body: settings}, relDoc{Source: "secret.yaml", Body: string(secret)})

	_, err := renderBytes(newDecrypter(t, ids[2]), data, false)
	want := fmt.Sprintf("secret.yaml: document 2 (Secret pay/db): no key fits: the document is encrypted for age recipients %s, %s; this bridge holds age keys for %s", r[0], r[1], r[2])
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	var de *secrets.DecryptError
	if !errors.As(err, &de) || !errors.Is(err, secrets.ErrDecrypt) {
		t.Fatalf("%v is not a *DecryptError wrapping ErrDecrypt", err)
	}
	if de.Source != "secret.yaml" || de.Document != 2 || de.Object != "Secret pay/db" || de.Reason != secrets.ReasonNoKey {
		t.Errorf("%+v", de)
	}
}

func TestDecryptErrorListsEveryKeyTried(t *testing.T) {
	// No credentials: Application Default Credentials fail at once, and the
	// key is reported as tried.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	ids := newAgeKeys(t, 2)
	secret := encryptSecret(t, dbSecret, recipientsOf(ids[0])...)
	const gcpKey = "projects/p/locations/global/keyRings/r/cryptoKeys/k"
	const awsKey = "arn:aws:kms:eu-west-1:111122223333:key/0000"
	withKMS := strings.Replace(string(secret), "sops:\n", "sops:\n"+
		"    gcp_kms:\n        - resource_id: "+gcpKey+"\n          created_at: \"2026-01-02T03:04:05Z\"\n          enc: CiQAbc==\n"+
		"    kms:\n        - arn: "+awsKey+"\n          created_at: \"2026-01-02T03:04:05Z\"\n          enc: AQICAHg=\n          aws_profile: \"\"\n", 1)

	_, err := renderBytes(newDecrypter(t, ids[1]), releaseStream(relDoc{Source: "secret.yaml", Body: withKMS}), false)
	var de *secrets.DecryptError
	if !errors.As(err, &de) || de.Reason != secrets.ReasonNoKey {
		t.Fatalf("error %v, want no_key", err)
	}
	for _, w := range []string{
		"encrypted for age recipient " + recipientsOf(ids[0])[0] + ", GCP KMS key " + gcpKey + " and AWS KMS key " + awsKey + ";",
		"this bridge holds age keys for " + recipientsOf(ids[1])[0],
		"GCP KMS key " + gcpKey + ": cannot reach Cloud KMS",
		"AWS KMS keys: not used by the bridge",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is not one line", err)
	}
}

func TestPostQuantumAgeKeys(t *testing.T) {
	id, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	d, err := secrets.NewDecrypter([]byte(id.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Recipients(); len(got) != 1 || got[0] != id.Recipient().String() {
		t.Errorf("recipients %v", got)
	}
	secret := encryptSecret(t, dbSecret, id.Recipient().String())
	out, err := renderBytes(d, releaseStream(relDoc{Source: "s.yaml", Body: string(secret)}), false)
	if err != nil || !strings.Contains(string(out), "password: hunter2\n") {
		t.Errorf("%v\n%s", err, out)
	}
}

func TestDecryptFailures(t *testing.T) {
	ids := newAgeKeys(t, 2)
	me := recipientsOf(ids[0])[0]
	d := newDecrypter(t, ids[0])
	secret := string(encryptSecret(t, dbSecret, me))
	other := string(encryptSecret(t, dbSecret, recipientsOf(ids[1])...))
	noKind, _ := sopsEncrypt(t, "apiVersion: v1\nmetadata:\n  name: nokind\nstringData:\n  a: b\n", secretsRegex, me)
	noKindOpaque, _ := sopsEncrypt(t, "apiVersion: v1\nmetadata:\n  name: nokind\nstringData:\n  a: b\n", "", me)
	dupOpaque, _ := sopsEncrypt(t, dbSecret, "", me)

	enc := regexp.MustCompile(`(?s)enc: \|\n.*?-----END AGE ENCRYPTED FILE-----\n`)
	value := regexp.MustCompile(`password: ENC\[AES256_GCM,data:([A-Za-z0-9+/]+)`)
	mac := regexp.MustCompile(`mac: ENC\[AES256_GCM,data:([A-Za-z0-9+/]+)`)
	flip := func(re *regexp.Regexp, s string) string {
		m := re.FindStringSubmatchIndex(s)
		if m == nil {
			t.Fatalf("%s not found in\n%s", re, s)
		}
		i := m[2] // the first byte of the base64 data
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	lastModified := regexp.MustCompile(`lastmodified: "[^"]+"`)

	cases := []struct {
		name, body, reason string
		object, detail     string
		// before is the document of a.yaml, ahead of b.yaml's two.
		before string
	}{
		{"a document for other keys", other, secrets.ReasonNoKey, "Secret pay/db", "this bridge holds age keys for " + me, api},
		{"a value changed", flip(value, secret), secrets.ReasonMACMismatch, "Secret pay/db", "a value was changed after encryption", api},
		{"a plain field changed", strings.Replace(secret, "type: Opaque", "type: kubernetes.io/tls", 1), secrets.ReasonMACMismatch, "Secret pay/db", "does not match the mac", api},
		{"a value removed", regexp.MustCompile(`    url: ENC\[.*\]\n`).ReplaceAllString(secret, ""), secrets.ReasonMACMismatch, "Secret pay/db", "does not match the mac", api},
		{"a value renamed", strings.Replace(secret, "    url: ENC[", "    uri: ENC[", 1), secrets.ReasonMACMismatch, "Secret pay/db", "a value was changed after encryption", api},
		{"a corrupted mac", flip(mac, secret), secrets.ReasonMACMismatch, "Secret pay/db", "the mac does not decrypt", api},
		{"lastmodified changed", lastModified.ReplaceAllString(secret, `lastmodified: "2020-01-01T00:00:00Z"`), secrets.ReasonMACMismatch, "Secret pay/db", "the mac does not decrypt", api},
		{"lastmodified missing", lastModified.ReplaceAllString(secret, ""), secrets.ReasonBadMetadata, "Secret pay/db", "sops cannot read it", api},
		{"a bad enc", enc.ReplaceAllString(secret, "enc: not age\n"), secrets.ReasonBadMetadata, "Secret pay/db", "the data key encrypted for age recipient " + me + " is unreadable", api},
		{"an enc from another document", enc.ReplaceAllString(secret, enc.FindString(string(encryptSecret(t, dbSecret, me)))), secrets.ReasonMACMismatch, "Secret pay/db", "", api},
		{"no key at all", regexp.MustCompile(`(?s)    age:\n.*?recipient: age1[a-z0-9]+\n`).ReplaceAllString(secret, ""), secrets.ReasonBadMetadata, "Secret pay/db", "No keys found", api},
		{"two encryption rules", strings.Replace(secret, "sops:\n", "sops:\n    unencrypted_suffix: _plain\n", 1), secrets.ReasonBadMetadata, "Secret pay/db", "more than one", api},
		{"a document without kind", string(noKind), secrets.ReasonInvalidDocument, "", "kind: missing", api},
		{"an encrypted document without kind", string(noKindOpaque), secrets.ReasonInvalidDocument, "", "kind: missing", api},
		{"an encrypted identity already used", string(dupOpaque), secrets.ReasonInvalidDocument, "", "Secret pay/db is already defined in a.yaml document 1", dbSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := releaseStream(relDoc{Source: "a.yaml", Body: c.before}, relDoc{Source: "b.yaml", Body: settings}, relDoc{Source: "b.yaml", Body: c.body})
			out, err := renderBytes(d, data, false)
			var de *secrets.DecryptError
			if !errors.Is(err, secrets.ErrDecrypt) || !errors.As(err, &de) {
				t.Fatalf("rendered %q, %v; want a *DecryptError wrapping ErrDecrypt", out, err)
			}
			if out != nil {
				t.Errorf("a failed render returned output")
			}
			if de.Reason != c.reason || de.Object != c.object || de.Source != "b.yaml" || de.Document != 2 {
				t.Errorf("%+v: want reason %s, object %q, b.yaml document 2", de, c.reason, c.object)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "b.yaml: document 2") || !strings.Contains(msg, c.detail) || strings.Contains(msg, "\n") {
				t.Errorf("message %q: want one line starting %q and saying %q", msg, "b.yaml: document 2", c.detail)
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("message %q holds a secret value", msg)
			}
		})
	}
}

func TestRenderRefusesToRenderNothing(t *testing.T) {
	d := newDecrypter(t)
	out, err := renderBytes(d, nil, true)
	if err != nil || out == nil || len(out) != 0 {
		t.Errorf("an empty tombstone: %q, %v; want empty output", out, err)
	}
	for _, c := range []struct {
		name      string
		data      []byte
		tombstone bool
		want      string
	}{
		{"a tombstone with data", []byte(settings), true, "a tombstone release must be empty"},
		{"an empty release", nil, false, "the release is empty but is not a tombstone"},
		{"a release of comments", []byte("# Source: a.yaml\n# nothing\n---\n\n"), false, ""},
		{"an invalid release", []byte("# Source: a.yaml\napiVersion: v1\n"), false, "kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderBytes(d, c.data, c.tombstone)
			var ie *render.InputError
			if !errors.Is(err, render.ErrInvalid) || !errors.As(err, &ie) || out != nil {
				t.Fatalf("%q, %v; want an *InputError wrapping ErrInvalid", out, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestNewDecrypter(t *testing.T) {
	ids := newAgeKeys(t, 3)
	file := "# a comment\n\n" + ids[2].String() + "\r\n  " + ids[0].String() + "  \n" + string(keyFile(ids[1], ids[0]))
	d, err := secrets.NewDecrypter([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := recipientsOf(ids...)
	slices.Sort(want)
	if got := d.Recipients(); !slices.Equal(got, want) {
		t.Errorf("recipients %v, want %v (sorted, once each)", got, want)
	}
	d.Recipients()[0] = "changed"
	if got := d.Recipients(); !slices.Equal(got, want) {
		t.Errorf("a caller changed the decrypter's recipients")
	}

	for _, c := range []struct{ name, file, want string }{
		{"a public key", "# keys\n" + ids[0].Recipient().String() + "\n", "line 2: not an age secret key"},
		{"a damaged key", ids[0].String() + "\n" + ids[1].String()[:40] + "\n", "line 2: malformed age secret key"},
		{"an SSH key", "\n\n-----BEGIN OPENSSH PRIVATE KEY-----\n", "line 3:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := secrets.NewDecrypter([]byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			for _, line := range strings.Split(c.file, "\n") {
				if len(line) > 20 && err != nil && strings.Contains(err.Error(), line[16:]) {
					t.Errorf("error %q quotes the key file", err)
				}
			}
		})
	}

	for _, empty := range []string{"", "\n# only comments\n"} {
		d, err := secrets.NewDecrypter([]byte(empty))
		if err != nil || len(d.Recipients()) != 0 {
			t.Errorf("key file %q: %v, %v; want a decrypter with no age key", empty, d, err)
		}
	}
}

func TestLoadDecrypter(t *testing.T) {
	ids := newAgeKeys(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(path, keyFile(ids...), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := secrets.LoadDecrypter(path)
	if err != nil || !slices.Equal(d.Recipients(), recipientsOf(ids...)) {
		t.Errorf("%v, %v", d, err)
	}
	if d, err := secrets.LoadDecrypter(""); err != nil || len(d.Recipients()) != 0 {
		t.Errorf("no key file: %v, %v", d, err)
	}
	if _, err := secrets.LoadDecrypter(filepath.Join(dir, "missing.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing key file: %v", err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("# keys go here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.LoadDecrypter(empty); err == nil || !strings.Contains(err.Error(), "holds no age secret key") {
		t.Errorf("a key file without keys: %v", err)
	}
}

// forgeValue encrypts a value the way sops does, under a document's data
// key: what only someone holding a key of the document could write.
func forgeValue(t *testing.T, dataKey []byte, path, value, typ string) string {
	t.Helper()
	block, err := aes.NewCipher(dataKey)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, 32)
	if err != nil {
		t.Fatal(err)
	}
	iv := make([]byte, 32)
	rand.Read(iv)
	out := gcm.Seal(nil, iv, []byte(value), []byte(path))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("ENC[AES256_GCM,data:%s,iv:%s,tag:%s,type:%s]", b64(out[:len(out)-16]), b64(iv), b64(out[len(out)-16:]), typ)
}

func TestAKeyHolderCannotCrashTheBridge(t *testing.T) {
	ids := newAgeKeys(t, 1)
	secret, dataKey := sopsEncrypt(t, dbSecret, secretsRegex, recipientsOf(ids...)...)
	password := regexp.MustCompile(`password: ENC\[[^\]]*\]`)
	// sops' aes.Cipher panics on a value of type bytes; its error for a value
	// of type int quotes the cleartext.
	for typ, reason := range map[string]string{
		"bytes":    secrets.ReasonInvalidDocument,
		"int":      secrets.ReasonMACMismatch,
		"comment":  secrets.ReasonMACMismatch,
		"nonsense": secrets.ReasonMACMismatch,
	} {
		t.Run("a value of type "+typ, func(t *testing.T) {
			forged := password.ReplaceAllString(string(secret), "password: "+forgeValue(t, dataKey, "stringData:password:", "hunter2", typ))
			_, err := renderBytes(newDecrypter(t, ids...), releaseStream(relDoc{Source: "s.yaml", Body: forged}), false)
			var de *secrets.DecryptError
			if !errors.As(err, &de) || de.Reason != reason {
				t.Fatalf("error %v, want a *DecryptError for %s", err, reason)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("message %q holds the secret value", err)
			}
		})
	}
}

// renderBytes renders data for an app with no tenancy policy.
func renderBytes(d *secrets.Decrypter, data []byte, tombstone bool) ([]byte, error) {
	out, err := d.Render(data, secrets.Options{App: "test/app", Tombstone: tombstone})
	return out.Body, err
}

// A tenancy policy decides which keys may decrypt an app's Secrets: the
// bridge holds every team's keys, but a release is decrypted only with its
// own prefix's.
func TestRenderTriesOnlyTheKeysItIsAllowed(t *testing.T) {
	ids := newAgeKeys(t, 2)
	teamA, teamB := recipientsOf(ids[0])[0], recipientsOf(ids[1])[0]
	d := newDecrypter(t, ids...)
	data := releaseStream(relDoc{Source: "secret.yaml", Body: string(encryptSecret(t, dbSecret, teamA))})
	var asked []string
	onlyB := func(keyType, id string) bool {
		asked = append(asked, keyType+" "+id)
		return keyType == "age" && id == teamB
	}
	_, err := d.Render(data, secrets.Options{App: "team-b/app", AllowKey: onlyB})
	var de *secrets.DecryptError
	if !errors.As(err, &de) || de.Reason != secrets.ReasonNoKey || !strings.Contains(err.Error(), "tenancy policy allows for team-b/app") || !strings.Contains(err.Error(), teamA) {
		t.Errorf("team A's Secret rendered for team B: %v; want no_key naming the policy and team A's recipient", err)
	}
	if !slices.Equal(asked, []string{"age " + teamA}) {
		t.Errorf("keys asked about: %q, want team A's recipient only", asked)
	}
	out, err := d.Render(data, secrets.Options{App: "team-a/app", AllowKey: func(_, id string) bool { return id == teamA }})
	if err != nil || !bytes.Contains(out.Body, []byte("hunter2")) || len(out.Objects) != 1 || out.Objects[0].Name != "db" || !out.Objects[0].Encrypted {
		t.Errorf("team A's Secret for team A: %v; objects %+v", err, out.Objects)
	}
}
