package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/webhook"
)

// TestJSONErrorObjects: with -o json a failure that printed nothing is an
// error object on stdout, whose exit is the process's exit code, so a
// script needs neither stderr nor a table of exit codes.
func TestJSONErrorObjects(t *testing.T) {
	startBucket(t)
	v1 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "1")})
	v2 := writeFiles(t, map[string]string{"cm.yaml": configMap("a", "2")})
	bucketops(t, "", "push", "prod/api", v2, "--sequence", "2").must(t)
	for _, c := range []struct {
		name string
		args []string
		code string
		exit int
	}{
		{"stale", []string{"push", "prod/api", v1, "--sequence", "1"}, "stale", exitStale},
		{"conflict", []string{"push", "prod/api", v1, "--sequence", "2"}, "conflict", exitConflict},
		{"invalid app", []string{"push", "Prod", v1}, "invalid_app", exitInvalid},
		{"invalid release", []string{"push", "prod/x", writeFiles(t, map[string]string{"bad.yaml": "a: [1, 2\n"})}, "invalid_release", exitInvalid},
		{"usage", []string{"push", "prod/x"}, "usage", exitInvalid},
		{"unknown command", []string{"pussh", "prod/x", v1}, "usage", exitInvalid},
		{"not found", []string{"show", "prod/nothing"}, "not_found", exitFailure},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := bucketops(t, "", append(c.args, "-o", "json")...)
			if r.code != c.exit {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, c.exit, r.stderr)
			}
			var o errorObject
			if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
				t.Fatalf("stdout %q is not an error object: %v", r.stdout, err)
			}
			if o.Error.Code != c.code || o.Error.Exit != c.exit || o.Error.Message == "" || !strings.Contains(r.stderr, o.Error.Message) {
				t.Errorf("error object %+v, want code %q, exit %d and the message on stderr (%s)", o.Error, c.code, c.exit, r.stderr)
			}
		})
	}
	// Text output keeps stdout empty on failure.
	if r := bucketops(t, "", "push", "prod/api", v1, "--sequence", "1"); r.stdout != "" {
		t.Errorf("a text failure printed %q on stdout", r.stdout)
	}
}

// TestPushWaitChecksTheBridgeFirst: push --wait against a bridge that
// can't tell deploys (no Argo CD, here) fails before publishing, with the
// bridge's reason as the JSON error's code.
func TestPushWaitChecksTheBridgeFirst(t *testing.T) {
	startBucket(t)
	dir := writeFiles(t, map[string]string{"cm.yaml": configMap("settings", "1")})
	startAPIWith(t, func(c *webhook.Config) {
		c.Tokens = append(c.Tokens, webhook.NewToken(webhook.RoleReader, testPluginToken))
	})
	r := bucketops(t, "", "push", "prod/payments", dir, "--wait", "-o", "json")
	if r.code != exitFailure || !strings.Contains(r.stderr, "no_argocd") || !strings.Contains(r.stderr, "nothing was published") {
		t.Errorf("push --wait to a bridge without Argo CD: exit %d, %s", r.code, r.stderr)
	}
	var o errorObject
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || o.Error.Code != "no_argocd" {
		t.Errorf("error object %q (%v), want code no_argocd", r.stdout, err)
	}
	if r := bucketops(t, "", "ls", "-o", "json"); strings.Contains(r.stdout, "prod/payments") {
		t.Errorf("push --wait published although the bridge has no Argo CD: %s", r.stdout)
	}
}
