package secrets_test

import (
	"errors"
	"strings"
	"testing"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"

	"github.com/bucketops/bucketops/provenance/kmstest"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
)

// onlyKey is a tenancy policy's AllowKey for one key.
func onlyKey(keyType, id string) func(string, string) bool {
	return func(t, i string) bool { return t == keyType && i == id }
}

// The review's reproduction of finding 1: team A's Secret copied into team
// B's app with only its recipient line rewritten from A's key to B's. The
// line is outside sops' MAC, so the document still looks encrypted for a
// key team B's rule allows; the bridge holds both teams' identities. Under
// the policy only B's identity may be tried, and it doesn't open A's data
// key: nothing is decrypted.
func TestARewrittenRecipientDecryptsNothing(t *testing.T) {
	ids := newAgeKeys(t, 2)
	teamA, teamB := recipientsOf(ids[0])[0], recipientsOf(ids[1])[0]
	d := newDecrypter(t, ids...)
	secretA := string(encryptSecret(t, dbSecret, teamA))
	relabelled := strings.ReplaceAll(secretA, teamA, teamB)
	if relabelled == secretA || !strings.Contains(relabelled, teamB) {
		t.Fatal("the recipient line was not rewritten")
	}
	data := releaseStream(relDoc{Source: "secret.yaml", Body: relabelled})

	out, err := d.Render(data, secrets.Options{App: "team-b/app", AllowKey: onlyKey("age", teamB)})
	var de *secrets.DecryptError
	if !errors.As(err, &de) || de.Reason != secrets.ReasonNoKey {
		t.Fatalf("team A's Secret, relabelled for team B, rendered for team B: %v\n%s", err, out.Body)
	}
	for _, want := range []string{"not encrypted for the recipient it names", "tenancy policy allows for team-b/app"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error holds the password: %v", err)
	}

	// Without a policy the bridge serves one tenant and tries every key it
	// holds (docs/tenancy.md): the same document renders.
	if out, err := d.Render(data, secrets.Options{App: "team-b/app"}); err != nil || !strings.Contains(string(out.Body), "hunter2") {
		t.Errorf("without a policy: %v", err)
	}
}

// The same copy with Cloud KMS keys: team A's Secret encrypted with team
// A's key, its resource_id rewritten to team B's key, which team B's rule
// allows and the bridge may use. Cloud KMS binds ciphertext to the key that
// made it, and the bridge asks for the key the document names, so the
// rewritten document is refused by Cloud KMS and never decrypted.
func TestARewrittenKMSKeyDecryptsNothing(t *testing.T) {
	fake := kmstest.Start(t)
	const (
		keyA = "projects/acme/locations/global/keyRings/bucketops/cryptoKeys/team-a"
		keyB = "projects/acme/locations/global/keyRings/bucketops/cryptoKeys/team-b"
	)
	fake.AddSymmetricKey(keyA)
	fake.AddSymmetricKey(keyB)
	client, err := kms.NewKeyManagementClient(t.Context(), fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	secretA := string(sopstest.EncryptForKMS(t, dbSecret, keyA, func(dataKey []byte) ([]byte, error) {
		resp, err := client.Encrypt(t.Context(), &kmspb.EncryptRequest{Name: keyA, Plaintext: dataKey})
		return resp.GetCiphertext(), err
	}))
	d, err := secrets.NewDecrypter(nil, secrets.WithKMSClientOptions(fake.ClientOptions()...))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("team A's Secret renders for team A with team A's key", func(t *testing.T) {
		out, err := d.Render(releaseStream(relDoc{Source: "secret.yaml", Body: secretA}), secrets.Options{App: "team-a/app", AllowKey: onlyKey("gcp_kms", keyA)})
		if err != nil || !strings.Contains(string(out.Body), "hunter2") {
			t.Fatalf("%v\n%s", err, out.Body)
		}
	})
	t.Run("relabelled for team B's key, it decrypts nothing", func(t *testing.T) {
		relabelled := strings.ReplaceAll(secretA, keyA, keyB)
		out, err := d.Render(releaseStream(relDoc{Source: "secret.yaml", Body: relabelled}), secrets.Options{App: "team-b/app", AllowKey: onlyKey("gcp_kms", keyB)})
		var de *secrets.DecryptError
		if !errors.As(err, &de) || de.Reason != secrets.ReasonNoKey || !strings.Contains(err.Error(), "refused by Cloud KMS") {
			t.Fatalf("team A's Secret, relabelled for team B's key, rendered: %v\n%s", err, out.Body)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error holds the password: %v", err)
		}
	})
	t.Run("team A's key is never asked for team B's app", func(t *testing.T) {
		before := fake.Decrypts()
		_, err := d.Render(releaseStream(relDoc{Source: "secret.yaml", Body: secretA}), secrets.Options{App: "team-b/app", AllowKey: onlyKey("gcp_kms", keyB)})
		if err == nil || !strings.Contains(err.Error(), "tenancy policy allows for team-b/app") {
			t.Errorf("team A's Secret as it is, for team B: %v", err)
		}
		if n := fake.Decrypts() - before; n != 0 {
			t.Errorf("Cloud KMS was asked %d times for a key the policy doesn't allow", n)
		}
	})
}
