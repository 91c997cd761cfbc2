package webhook_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/appset"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

const generatorToken = "generator-token-0123456789abcdef"

// TestGeneratorRoute: only the generator token reaches the ApplicationSet
// generator, and it reaches nothing else.
func TestGeneratorRoute(t *testing.T) {
	b := serveBridgeConfig(t, storetest.New(t, true), nil, func(c *webhook.Config) {
		g, err := appset.New(appset.Config{Releases: c.Releases.(appset.Lister)})
		if err != nil {
			t.Fatal(err)
		}
		c.Generator = g
		c.Tokens = append(c.Tokens, webhook.NewToken(webhook.RoleGenerator, generatorToken))
	})
	b.publish(t, "prod/api", configMap("a", "1"))

	post := func(token string) (int, string) {
		t.Helper()
		r := b.request(t, http.MethodPost, appset.Path, token, strings.NewReader(`{"applicationSetName":"fleet","input":{"parameters":{"prefix":"prod"}}}`))
		return r.status, r.body
	}
	for token, want := range map[string]int{"": 401, "generator-token-0123456789abcdeX": 401, pluginToken: 403, readerToken: 403, generatorToken: 200} {
		status, body := post(token)
		if status != want {
			t.Errorf("token %q: %d, want %d: %s", token, status, want, body)
		}
		if status == 200 {
			var resp appset.Response
			if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Output.Parameters) != 1 || resp.Output.Parameters[0].App != "prod/api" {
				t.Errorf("generator answer %s (%v)", body, err)
			}
		}
	}
	for _, path := range []string{"/v1/apps", "/v1/apps/prod/api/-/manifests", "/v1/apps/prod/api/-/releases"} {
		if r := b.get(t, path, generatorToken); r.status != 403 {
			t.Errorf("%s with the generator token: %d, want 403", path, r.status)
		}
	}
}
