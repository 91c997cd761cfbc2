package webhook_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
)

// secret is a Secret whose values only the app's key can read.
func secret(app, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: pay\ntype: Opaque\nstringData:\n  password: %s\n",
		strings.ReplaceAll(app, "/", "-"), value)
}

func TestConcurrentRendersOfEncryptedAppsAreIdentical(t *testing.T) {
	const apps, renders = 8, 64
	keys := sopstest.NewAgeKeys(t, apps)
	dec, err := secrets.NewDecrypter(sopstest.KeyFile(keys...))
	if err != nil {
		t.Fatal(err)
	}
	b := newBridge(t, dec)
	names := make([]string, apps)
	for i := range apps {
		names[i] = fmt.Sprintf("team%d/payments", i)
		enc := sopstest.EncryptSecret(t, secret(names[i], fmt.Sprintf("s3cret-%d", i)), keys[i].Recipient().String())
		b.publish(t, names[i], configMap("settings", fmt.Sprint(i))+"---\n"+string(enc))
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cwd, _ := os.Getwd()
	before, _ := os.ReadDir(cwd)

	// The serial render of each app is the reference.
	want := make([]string, apps)
	for i, app := range names {
		r := b.get(t, "/v1/apps/"+app+"/-/manifests", pluginToken)
		if r.status != 200 || !strings.Contains(r.body, fmt.Sprintf("password: s3cret-%d", i)) {
			t.Fatalf("%s: %d %s", app, r.status, r.body)
		}
		want[i] = r.body
	}
	// Cold renders too: a bridge with an empty cache, all at once.
	for _, target := range []*bridge{b, serveBridge(t, b.bucket, dec)} {
		var wg sync.WaitGroup
		for n := range renders {
			wg.Go(func() {
				i := n % apps
				r := target.get(t, "/v1/apps/"+names[i]+"/-/manifests", pluginToken)
				if r.status != 200 || r.body != want[i] {
					t.Errorf("render %d of %s differs from the serial one (%d):\n%s", n, names[i], r.status, r.body)
				}
			})
		}
		wg.Wait()
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("renders left files in TMPDIR: %v", entries)
	}
	if after, _ := os.ReadDir(cwd); len(after) != len(before) {
		t.Errorf("renders left files in the working directory: %v", after)
	}
}

func TestEncryptedReleasesThatCannotBeDecryptedFailClosed(t *testing.T) {
	keys := sopstest.NewAgeKeys(t, 2)
	dec, err := secrets.NewDecrypter(sopstest.KeyFile(keys[0]))
	if err != nil {
		t.Fatal(err)
	}
	b := newBridge(t, dec)
	b.publish(t, "prod/foreign", configMap("a", "1")+"---\n"+string(sopstest.EncryptSecret(t, secret("x", "v"), keys[1].Recipient().String())))
	enc := string(sopstest.EncryptSecret(t, secret("y", "v"), keys[0].Recipient().String()))
	tampered := strings.Replace(enc, "password: ENC[AES256_GCM,data:", "password: ENC[AES256_GCM,data:AA", 1)
	b.publish(t, "prod/tampered", tampered)

	r := b.get(t, "/v1/apps/prod/foreign/-/manifests", pluginToken)
	if r.status != 422 || r.reason(t) != "no_key" || !strings.Contains(r.body, keys[1].Recipient().String()) || !strings.Contains(r.body, keys[0].Recipient().String()) {
		t.Errorf("no key fits: %d %s; want 422 no_key naming the recipients tried and held", r.status, r.body)
	}
	r = b.get(t, "/v1/apps/prod/tampered/-/manifests", pluginToken)
	if r.status != 422 || r.reason(t) != "mac_mismatch" {
		t.Errorf("a tampered value: %d %s; want 422 mac_mismatch", r.status, r.body)
	}
	if strings.Contains(r.body, "apiVersion") {
		t.Errorf("a failed render returned manifests: %s", r.body)
	}
}
