package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/store"
)

// push --retain-for and rollback --retain-until put GCS Object Retention on
// the generation they write, what docs/signing.md recommends with require:
// signed so that the tail of a signed chain can't be deleted.
func TestPublishWithObjectRetention(t *testing.T) {
	emu := startBucket(t)
	first := decode[store.Result](t, bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("web", "1")}), "--retain-for", "24h", "--retain-mode", "Locked", "-o", "json").must(t).stdout)
	bucketops(t, "", "push", "prod/web", writeFiles(t, map[string]string{"cm.yaml": configMap("web", "2")})).must(t)
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	bucketops(t, "", "rollback", "prod/web", "--to", strconv.FormatInt(first.Generation, 10), "--retain-until", until.Format(time.RFC3339)).must(t)

	obj := gcs(t, emu).Object("prod/web/manifests.yaml")
	pushed, err := obj.Generation(first.Generation).Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r := pushed.Retention; r == nil || r.Mode != "Locked" || time.Until(r.RetainUntil) < 23*time.Hour {
		t.Errorf("push --retain-for 24h --retain-mode Locked: retention %+v", r)
	}
	head, err := obj.Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r := head.Retention; r == nil || r.Mode != "Unlocked" || !r.RetainUntil.Equal(until) {
		t.Errorf("rollback --retain-until %s: retention %+v", until, r)
	}
	if err := obj.Generation(first.Generation).Delete(t.Context()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("deleting a retained generation: %v, want 403", err)
	}
}

func TestRetentionBadInput(t *testing.T) {
	startBucket(t)
	files := writeFiles(t, map[string]string{"cm.yaml": configMap("web", "1")})
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"both":         {[]string{"--retain-for", "1h", "--retain-until", "2099-01-01T00:00:00Z"}, "give one"},
		"negative":     {[]string{"--retain-for", "-1h"}, "positive duration"},
		"not RFC 3339": {[]string{"--retain-until", "tomorrow"}, "RFC 3339"},
		"in the past":  {[]string{"--retain-until", "2001-01-01T00:00:00Z"}, "not in the future"},
		"bad mode":     {[]string{"--retain-for", "1h", "--retain-mode", "forever"}, "say Unlocked or Locked"},
	} {
		r := bucketops(t, "", append([]string{"push", "prod/web", files}, c.args...)...)
		if r.code != exitInvalid || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d %q, want exit 2 saying %q", name, r.code, r.stderr, c.want)
		}
	}
	if r := bucketops(t, "", "ls"); strings.Contains(r.stdout, "prod/web") {
		t.Errorf("a refused retention wrote a release: %s", r.stdout)
	}
}
