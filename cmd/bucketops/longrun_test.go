package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLongRunsSayHowFarTheyGot: verify --chain reading every release's
// bytes says how many it has checked, on stderr, once it has run for a
// while (here at once), and its stdout stays the findings alone.
func TestLongRunsSayHowFarTheyGot(t *testing.T) {
	startBucket(t)
	key := filepath.Join(t.TempDir(), "ci")
	bucketops(t, "", "keygen", "--out", key).must(t)
	for _, v := range []string{"1", "2", "3"} {
		bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("web", v)}), "--sign-key", key+".key", "--sequence", v).must(t)
	}
	after, every := progressAfter, progressEvery
	progressAfter, progressEvery = 0, 0
	t.Cleanup(func() { progressAfter, progressEvery = after, every })

	r := bucketops(t, "", "verify", "prod/web", "--chain", "--key", key+".pub", "-o", "json").must(t)
	if !strings.Contains(r.stderr, "bucketops: verify --chain prod/web: checked the bytes of 3 of 3 releases") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	decode[verifyOutput](t, r.stdout)
}
