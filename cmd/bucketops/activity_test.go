package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/ui"
	"github.com/bucketops/bucketops/webhook"
)

const testAuditorToken = "auditor-token-alice-0123456789abcdef"

// startAuditedAPI serves the bridge with its auditors' pages wired as
// bucketops-bridge wires them, and points the CLI at it with alice's
// auditor token.
func startAuditedAPI(t *testing.T) *store.Store { return startAuditedAPIListing(t, 0) }

// startAuditedAPIListing is startAuditedAPI with an activity answer that
// lists at most maxActivity publishes (0: the default).
func startAuditedAPIListing(t *testing.T, maxActivity int) *store.Store {
	t.Helper()
	st, _ := startAPIWith(t, func(c *webhook.Config) {
		c.Tokens = append(c.Tokens, webhook.NewAuditorToken("alice", testAuditorToken))
		tokens := c.Tokens
		st := c.Releases.(*store.Store)
		u, err := ui.New(ui.Config{
			MaxActivity: maxActivity,
			Releases:    st, Location: st.Location(), Logger: c.Logger,
			Authenticate:  func(token string) bool { return webhook.HasRole(tokens, token, webhook.RoleReader) },
			Auditor:       func(token string) (string, bool) { return webhook.AuditorName(tokens, token) },
			SessionSecret: webhook.DeriveKey(tokens, "ui sessions", webhook.RoleReader, webhook.RoleAuditor),
		})
		if err != nil {
			t.Fatal(err)
		}
		c.UI = u.Handler()
	})
	tokenFile := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tokenFile, []byte(testAuditorToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUCKETOPS_TOKEN_FILE", tokenFile)
	return st
}

// TestActivityPrintsTheExport: bucketops activity prints the bridge's
// activity export of the window, CSV or -o json, with an auditor token.
func TestActivityPrintsTheExport(t *testing.T) {
	st := startAuditedAPI(t)
	publish(t, st, "prod/api", configMap("a", "1"))
	publish(t, st, "prod/api", configMap("a", "2"))
	publish(t, st, "dev/web", configMap("b", "1"))

	out := bucketops(t, "", "activity", "--from", "2000-01-01", "--to", "2100-01-01", "--prefix", "prod").must(t)
	rows, err := csv.NewReader(strings.NewReader(out.stdout)).ReadAll()
	if err != nil || len(rows) != 3 || rows[0][0] != "time" || rows[1][1] != "prod/api" || rows[2][1] != "prod/api" {
		t.Errorf("activity --prefix prod printed %q (%v), want the header and prod/api's two publishes", out.stdout, err)
	}

	out = bucketops(t, "", "activity", "--from", "2000-01-01", "-o", "json").must(t)
	var export struct {
		Truncated bool            `json:"truncated"`
		Releases  []store.Release `json:"releases"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &export); err != nil || len(export.Releases) != 3 || export.Truncated {
		t.Errorf("activity -o json printed %s (%v), want the three publishes", out.stdout, err)
	}

	// A window the page refuses is a usage error that says why.
	bad := bucketops(t, "", "activity", "--from", "2100-01-01", "--to", "2000-01-01")
	if bad.code != exitInvalid || !strings.Contains(bad.stderr, "is not before to") {
		t.Errorf("an empty window: exit %d, %s", bad.code, bad.stderr)
	}

	// The plugin's token reads no activity.
	plugin := filepath.Join(t.TempDir(), "plugin.token")
	if err := os.WriteFile(plugin, []byte(testPluginToken), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUCKETOPS_TOKEN_FILE", plugin)
	if r := bucketops(t, "", "activity"); r.code == 0 || !strings.Contains(r.stderr, "reader or auditor token") {
		t.Errorf("activity with the plugin token: exit %d, %s", r.code, r.stderr)
	}
}

// TestActivitySaysWhenTruncated: a window of more publishes than the
// export lists prints the newest, still a CSV any reader parses, and says
// on stderr how many it left out and how to narrow the window.
func TestActivitySaysWhenTruncated(t *testing.T) {
	st := startAuditedAPIListing(t, 2)
	publish(t, st, "prod/api", configMap("a", "1"))
	publish(t, st, "prod/api", configMap("a", "2"))
	publish(t, st, "dev/web", configMap("b", "1"))

	out := bucketops(t, "", "activity", "--from", "2000-01-01").must(t)
	rows, err := csv.NewReader(strings.NewReader(out.stdout)).ReadAll()
	if err != nil || len(rows) != 3 || rows[1][1] != "dev/web" || rows[2][1] != "prod/api" {
		t.Errorf("a truncated activity printed %q (%v), want the header and the two newest publishes", out.stdout, err)
	}
	if !strings.Contains(out.stderr, "the window holds 3 publishes and the export lists only the newest 2: narrow it") {
		t.Errorf("a truncated activity warned %q, want the counts and what to do", out.stderr)
	}
	// A window the export holds whole warns of nothing.
	out = bucketops(t, "", "activity", "--from", "2000-01-01", "--prefix", "dev").must(t)
	if strings.Contains(out.stderr, "warning") {
		t.Errorf("a whole window warned %q", out.stderr)
	}
}
