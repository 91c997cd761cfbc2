package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketops/bucketops/render/sopstest"
)

// generate runs `bucketops plugin generate` as argocd-cmp-server does: a
// process with the Application's parameters in its environment, in a
// working directory of its own.
func (b *bridgeProc) generate(t *testing.T, app, workdir, tmpdir string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "bucketops"), "plugin", "generate")
	cmd.Env = append(os.Environ(), b.env...)
	cmd.Env = append(cmd.Env, "PARAM_APP="+app, "TMPDIR="+tmpdir, "HOME="+tmpdir)
	cmd.Dir = workdir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func secretYAML(app, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: pay\nstringData:\n  password: %s\n", strings.ReplaceAll(app, "/", "-"), value)
}

func TestConcurrentPluginProcessesRenderIdentically(t *testing.T) {
	const apps, processes = 8, 64
	keys := sopstest.NewAgeKeys(t, apps)
	keyFile := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keyFile, sopstest.KeyFile(keys...), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, "--age-key-file", keyFile)
	names := make([]string, apps)
	for i := range apps {
		names[i] = fmt.Sprintf("team%d/payments", i)
		enc := sopstest.EncryptSecret(t, secretYAML(names[i], fmt.Sprintf("s3cret-%d", i)), keys[i].Recipient().String())
		b.bucketops(t, configMap(fmt.Sprint(i))+"---\n"+string(enc), "push", names[i], "-")
	}
	want := make([]string, apps)
	for i, app := range names {
		out, stderr, err := b.generate(t, app, t.TempDir(), t.TempDir())
		if err != nil || !strings.Contains(out, fmt.Sprintf("password: s3cret-%d", i)) {
			t.Fatalf("%s: %v %s\n%s", app, err, stderr, out)
		}
		want[i] = out
	}
	var wg sync.WaitGroup
	for n := range processes {
		work, tmp := t.TempDir(), t.TempDir()
		wg.Go(func() {
			i := n % apps
			out, stderr, err := b.generate(t, names[i], work, tmp)
			if err != nil || out != want[i] {
				t.Errorf("process %d for %s: %v %s\n%s", n, names[i], err, stderr, out)
			}
			for _, dir := range []string{work, tmp} {
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("process %d left files in %s: %v", n, dir, entries)
				}
			}
		})
	}
	wg.Wait()
}

func TestPluginProcessFailsClosed(t *testing.T) {
	keys := sopstest.NewAgeKeys(t, 2)
	keyFile := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keyFile, sopstest.KeyFile(keys[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, "--age-key-file", keyFile)
	b.bucketops(t, string(sopstest.EncryptSecret(t, secretYAML("x", "v"), keys[1].Recipient().String())), "push", "prod/foreign", "-")
	enc := string(sopstest.EncryptSecret(t, secretYAML("y", "v"), keys[0].Recipient().String()))
	b.bucketops(t, strings.Replace(enc, "password: ENC[AES256_GCM,data:", "password: ENC[AES256_GCM,data:AA", 1), "push", "prod/tampered", "-")
	b.bucketops(t, configMap("1"), "push", "prod/ok", "-")

	for _, c := range []struct{ app, want string }{
		{"prod/foreign", "no_key"},
		{"prod/tampered", "mac_mismatch"},
		{"prod/missing", "app_not_found"},
	} {
		out, stderr, err := b.generate(t, c.app, t.TempDir(), t.TempDir())
		if err == nil || out != "" || !strings.Contains(stderr, c.app) || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: err %v, stdout %q, stderr %q; want a non-zero exit, no output and one line saying %s", c.app, err, out, stderr, c.want)
		}
	}
}
