package main

import (
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/bucketops/bucketops/webhook"
)

type doctorCheck struct {
	Name, Result, Detail string
}

func doctor(t *testing.T, args ...string) (map[string]doctorCheck, result) {
	t.Helper()
	r := bucketops(t, "", append([]string{"doctor", "-o", "json"}, args...)...)
	checks := map[string]doctorCheck{}
	for _, c := range decode[[]doctorCheck](t, r.stdout) {
		checks[c.Name] = c
	}
	return checks, r
}

// TestDoctor: one command says what works and what to do about the rest:
// the emulator, the bucket, the bridge, the token's role and Argo CD.
func TestDoctor(t *testing.T) {
	emu := startBucket(t)
	startAPIWith(t, func(c *webhook.Config) {
		c.Tokens = append(c.Tokens, webhook.NewToken(webhook.RoleReader, "reader-token-0123456789abcdef"))
	})
	checks, r := doctor(t)
	if r.code != exitFailure {
		t.Errorf("doctor with the plugin's token: exit %d, want 1", r.code)
	}
	if c := checks["gcs"]; c.Result != "ok" || !strings.Contains(c.Detail, "emulator at "+emu.Host()) {
		t.Errorf("gcs: %+v", c)
	}
	if c := checks["bucket"]; c.Result != "ok" || !strings.Contains(c.Detail, "Object Versioning on") {
		t.Errorf("bucket: %+v", c)
	}
	if c := checks["bridge"]; c.Result != "ok" {
		t.Errorf("bridge: %+v", c)
	}
	if c := checks["token"]; c.Result != "fail" || !strings.Contains(c.Detail, "not a reader token") {
		t.Errorf("token (the plugin's): %+v", c)
	}

	t.Setenv("BUCKETOPS_TOKEN_FILE", writeToken(t, "reader-token-0123456789abcdef"))
	checks, r = doctor(t)
	if r.code != 0 || checks["token"].Result != "ok" {
		t.Errorf("doctor with a reader token: exit %d, %+v", r.code, checks)
	}
	if c := checks["argocd"]; c.Result != "warn" || !strings.Contains(c.Detail, "no Argo CD") {
		t.Errorf("argocd: %+v", c)
	}

	emu.Server().CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "unversioned"})
	checks, r = doctor(t, "--bucket", "gs://unversioned")
	if c := checks["bucket"]; r.code != exitFailure || c.Result != "fail" || !strings.Contains(c.Detail, "gcloud storage buckets update gs://unversioned --versioning") {
		t.Errorf("an unversioned bucket: exit %d, %+v", r.code, c)
	}
	if text := bucketops(t, "", "doctor", "--bucket", "gs://unversioned"); !strings.Contains(text.stdout, "fail  bucket") {
		t.Errorf("text output:\n%s", text.stdout)
	}
}
