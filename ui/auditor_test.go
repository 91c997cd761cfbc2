package ui_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/logtest"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

const auditorToken = "auditor-token-alice-0123456789abcdef"

// auditedSite serves the pages over one app's two releases, to the reader
// token and to alice's auditor token, logging to logs.
func auditedSite(t *testing.T) (string, *logtest.Buffer) {
	t.Helper()
	st := storetest.New(t, true).Store(t, "")
	for i, author := range []string{"alice@example.com", "bob@example.com"} {
		rel, err := render.AssembleStream("release.yaml", strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  n: \""+author+"\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Publish(t.Context(), "prod/api", store.Publication{Data: rel.Bytes, Resources: rel.Resources(), Sequence: uint64(i + 1), Author: author}); err != nil {
			t.Fatal(err)
		}
	}
	logs := &logtest.Buffer{}
	u, err := ui.New(ui.Config{
		Releases: st, Location: st.Location(), Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Authenticate: func(tok string) bool { return tok == token },
		Auditor: func(tok string) (string, bool) {
			if tok == auditorToken {
				return "alice", true
			}
			return "", false
		},
		SessionSecret: []byte(strings.Repeat("k", 32)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	return srv.URL, logs
}

func bearerGet(t *testing.T, u, tok string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return do(t, client(t), req)
}

func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return answer{resp.StatusCode, resp.Header, b.String()}
}

// TestAuditorLogsInUnderItsName: an auditor token opens a session that
// shows whose it is, and every request it makes is an access log line
// with the name, never the token.
func TestAuditorLogsInUnderItsName(t *testing.T) {
	base, logs := auditedSite(t)
	c := client(t)
	form := get(t, c, base+"/ui/login")
	if !strings.Contains(form.body, "Reader or auditor token") {
		t.Errorf("the login form doesn't ask for a reader or auditor token:\n%s", form.body)
	}
	resp, err := c.PostForm(base+"/ui/login", url.Values{"token": {auditorToken}, "next": {"/ui/apps"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with the auditor token: %d", resp.StatusCode)
	}
	apps := get(t, c, base+"/ui/apps")
	if apps.status != http.StatusOK || !strings.Contains(apps.body, `<span class="who">alice (auditor token)</span>`) {
		t.Errorf("apps page after the auditor's login (%d) doesn't show alice (auditor token):\n%s", apps.status, apps.body)
	}

	lines := logs.Lines(t, "auditor access")
	if len(lines) != 2 {
		t.Fatalf("%d access log lines, want 2 (the login and the apps page):\n%s", len(lines), logs)
	}
	for i, want := range []struct {
		method, path string
		status       float64
	}{{"POST", "/ui/login", 303}, {"GET", "/ui/apps", 200}} {
		if l := lines[i]; l["auditor"] != "alice" || l["method"] != want.method || l["path"] != want.path || l["status"] != want.status {
			t.Errorf("access log line %d: %v, want alice %s %s %v", i, l, want.method, want.path, want.status)
		}
	}
	if strings.Contains(logs.String(), auditorToken) {
		t.Errorf("the log holds the auditor's token:\n%s", logs)
	}

	// The reader token's session is no auditor's: no access log line.
	r := client(t)
	resp, err = r.PostForm(base+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := get(t, r, base+"/ui/apps"); !strings.Contains(a.body, `<span class="who">reader token</span>`) {
		t.Errorf("the reader's session doesn't say reader token")
	}
	if n := len(logs.Lines(t, "auditor access")); n != 2 {
		t.Errorf("the reader's requests made access log lines: %d lines", n)
	}
}

// TestActivityExportTakesABearerToken: a scheduled report fetches the
// activity export with an auditor (or reader) token, no browser; a bearer
// token reaches nothing else of the pages.
func TestActivityExportTakesABearerToken(t *testing.T) {
	base, logs := auditedSite(t)
	window := "from=2000-01-01&to=2100-01-01"

	csvAnswer := bearerGet(t, base+"/ui/activity?format=csv&"+window, auditorToken)
	if csvAnswer.status != http.StatusOK || !strings.HasPrefix(csvAnswer.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV export with the auditor token: %d %s: %s", csvAnswer.status, csvAnswer.header.Get("Content-Type"), csvAnswer.body)
	}
	rows, err := csv.NewReader(strings.NewReader(csvAnswer.body)).ReadAll()
	if err != nil || len(rows) != 3 || rows[0][1] != "app" || rows[1][1] != "prod/api" {
		t.Errorf("CSV export: %v (%v), want a header and two prod/api rows", rows, err)
	}

	jsonAnswer := bearerGet(t, base+"/ui/activity?format=json&author=bob&"+window, auditorToken)
	var export struct {
		Releases []store.Release `json:"releases"`
	}
	if jsonAnswer.status != http.StatusOK {
		t.Fatalf("JSON export with the auditor token: %d: %s", jsonAnswer.status, jsonAnswer.body)
	}
	if err := json.Unmarshal([]byte(jsonAnswer.body), &export); err != nil || len(export.Releases) != 1 || export.Releases[0].Author != "bob@example.com" {
		t.Errorf("JSON export of bob's publishes: %+v (%v)", export, err)
	}
	if a := bearerGet(t, base+"/ui/activity?format=json", token); a.status != http.StatusOK {
		t.Errorf("JSON export with the reader token: %d", a.status)
	}

	for _, c := range []struct {
		name, path, token string
		want              int
	}{
		{"a wrong token is refused", "/ui/activity?format=csv", "not-a-token-0123456789abcdef", 401},
		{"the activity page itself takes a login", "/ui/activity", auditorToken, 403},
		{"the apps page takes a login", "/ui/apps", auditorToken, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			if a := bearerGet(t, base+c.path, c.token); a.status != c.want {
				t.Errorf("%s with a bearer token: %d, want %d", c.path, a.status, c.want)
			}
		})
	}

	lines := logs.Lines(t, "auditor access")
	if len(lines) != 4 {
		t.Fatalf("%d access log lines, want 4 (the auditor's two exports and two refusals):\n%s", len(lines), logs)
	}
	if l := lines[0]; l["auditor"] != "alice" || l["path"] != "/ui/activity" || l["status"] != float64(200) || !strings.Contains(l["query"].(string), "format=csv") {
		t.Errorf("access log line of the CSV export: %v", l)
	}
	if l := lines[3]; l["path"] != "/ui/apps" || l["status"] != float64(403) {
		t.Errorf("access log line of the refused apps page: %v", l)
	}
	if strings.Contains(logs.String(), auditorToken) {
		t.Errorf("the log holds the auditor's token:\n%s", logs)
	}
}
