package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render/sopstest"
)

// The writing verbs check a release against the tenancy policy before
// anything is written: a clear error, exit 2, the bucket unchanged.
func TestWritingVerbsEnforceThePolicy(t *testing.T) {
	emu := startBucket(t)
	keys := sopstest.NewAgeKeys(t, 2)
	a, b := keys[0].Recipient().String(), keys[1].Recipient().String()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(file, []byte(`rules:
  - {prefix: team-a, projects: [team-a], namespaces: [pay], decryptionKeys: [`+a+`]}
  - {prefix: team-b, projects: [team-b], namespaces: [team-b], decryptionKeys: [`+b+`]}
`), 0o600)
	secret := func(ns, recipient string) string {
		return string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: "+ns+"\nstringData:\n  password: x\n", recipient))
	}
	good := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1"), "secret.yaml": secret("pay", a)})
	bucketops(t, "", "push", "team-a/api", good, "--policy", file).must(t)
	objects := objectCount(t, emu.Server(), emu.Bucket())

	for _, tc := range []struct {
		name    string
		args    []string
		mention string
	}{
		{"a plaintext Secret", []string{"push", "team-a/api", writeFiles(t, map[string]string{"s.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: pay\nstringData:\n  password: x\n"})}, "in clear text"},
		{"another team's namespace", []string{"push", "team-a/api", writeFiles(t, map[string]string{"cm.yaml": strings.Replace(configMap("x", "1"), "namespace: pay", "namespace: team-b", 1)})}, `namespace "team-b"`},
		{"a Secret encrypted for another team's key", []string{"push", "team-a/api", writeFiles(t, map[string]string{"s.yaml": secret("pay", b)})}, "none of which the rule's decryptionKeys allow"},
		{"a cluster-scoped object", []string{"push", "team-a/api", writeFiles(t, map[string]string{"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"})}, "cluster-scoped"},
		{"an app no rule covers", []string{"push", "other/api", good}, "no rule"},
		{"a promotion across teams", []string{"promote", "team-a/api", "team-b/api"}, "may not be copied here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bucketops(t, "", append(tc.args, "--policy", file)...)
			if r.code != exitInvalid || !strings.Contains(r.stderr, "denied by policy") || !strings.Contains(r.stderr, tc.mention) {
				t.Errorf("exit %d, stderr %q; want exit 2 mentioning %q", r.code, r.stderr, tc.mention)
			}
			if n := objectCount(t, emu.Server(), emu.Bucket()); n != objects {
				t.Errorf("%d objects after a refused write, want %d", n, objects)
			}
		})
	}

	t.Run("BUCKETOPS_POLICY is the default, and a rollback within the rule passes", func(t *testing.T) {
		t.Setenv("BUCKETOPS_POLICY", file)
		if r := bucketops(t, "", "push", "other/api", good); r.code != exitInvalid || !strings.Contains(r.stderr, "no rule") {
			t.Errorf("push outside the policy with BUCKETOPS_POLICY set: exit %d %s", r.code, r.stderr)
		}
		first := decode[[]map[string]any](t, bucketops(t, "", "log", "team-a/api", "-o", "json").must(t).stdout)[0]
		bucketops(t, "", "push", "team-a/api", writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "2")})).must(t)
		back := decode[map[string]any](t, bucketops(t, "", "rollback", "team-a/api", "--to", fmt.Sprintf("%.0f", first["generation"]), "-o", "json").must(t).stdout)
		if back["digest"] != first["digest"] {
			t.Errorf("rollback: %v, want the first release's bytes", back)
		}
	})

	t.Run("a broken policy file is a usage error", func(t *testing.T) {
		broken := filepath.Join(t.TempDir(), "broken.yaml")
		os.WriteFile(broken, []byte("rules:\n  - prefix: a\n"), 0o600)
		if r := bucketops(t, "", "push", "team-a/api", good, "--policy", broken); r.code != exitInvalid || !strings.Contains(r.stderr, "no projects") {
			t.Errorf("exit %d %q", r.code, r.stderr)
		}
	})
}

// TestPushWarnsOfPlaintextSecretsWithoutAPolicy: with no policy to refuse
// it, a Secret in clear is published, with a warning naming it and what to
// do; a release without one gives no warning.
func TestPushWarnsOfPlaintextSecretsWithoutAPolicy(t *testing.T) {
	startBucket(t)
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: pay\nstringData:\n  password: hunter2\n"
	dir := writeFiles(t, map[string]string{"secret.yaml": secret, "cm.yaml": configMap("settings", "1")})
	r := bucketops(t, "", "push", "prod/pay", dir).must(t)
	if !strings.Contains(r.stderr, "warning: prod/pay: Secret pay/db (secret.yaml) is not SOPS-encrypted") || !strings.Contains(r.stderr, "sops --encrypted-regex") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "ConfigMap") {
		t.Errorf("warned about a ConfigMap: %s", r.stderr)
	}
	clean := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "2")})
	if r := bucketops(t, "", "push", "prod/pay", clean).must(t); strings.Contains(r.stderr, "warning") {
		t.Errorf("a release without Secrets warned: %s", r.stderr)
	}
}
