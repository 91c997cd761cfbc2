package ui_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// TestReleasesByCommit: the commit Argo CD's History shows finds its
// release on the pages, in the release URL and in the timeline's search,
// as do a generation and a digest; the release page and the timeline show
// each release's commit.
func TestReleasesByCommit(t *testing.T) {
	s := newSite(t)
	c := client(t)
	s.login(t, c)
	hist, err := s.store.History(t.Context(), "prod/api", store.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldest := slices.Clone(hist)
	slices.Reverse(oldest)
	shas, err := gitview.Chain(s.store.Location(), oldest)
	if err != nil {
		t.Fatal(err)
	}
	rel, sha := oldest[4], shas[4] // build 5
	want := fmt.Sprintf("/ui/apps/prod/api/-/releases/%d", rel.Generation)

	for _, path := range []string{
		"/ui/apps/prod/api/-/releases/" + sha,
		"/ui/apps/prod/api/-/releases/" + gitview.ShortSHA(sha, 7), // digits alone name a generation
		"/ui/apps/prod/api/-/releases?q=" + sha[:10],
		"/ui/apps/prod/api/-/releases?q=" + url.QueryEscape(rel.Digest),
		"/ui/apps/prod/api/-/releases?q=" + strings.TrimPrefix(rel.Digest, "sha256:")[:12],
		fmt.Sprintf("/ui/apps/prod/api/-/releases?q=%d", rel.Generation),
	} {
		if a := get(t, c, s.url+path); a.status != 303 || a.header.Get("Location") != want {
			t.Errorf("%s: %d to %q, want a redirect to %s", path, a.status, a.header.Get("Location"), want)
		}
	}
	page := get(t, c, s.url+want)
	if page.status != 200 || !strings.Contains(page.body, `<code id="commit">`+sha+`</code>`) {
		t.Errorf("the release page doesn't show its commit %s:\n%s", sha, page.body)
	}
	timeline := get(t, c, s.url+"/ui/apps/prod/api/-/releases?page=3")
	// The prefix shown is one the release URL reads back as a commit.
	if !strings.Contains(timeline.body, `title="`+sha+`">`+gitview.ShortSHA(sha, 12)+`</code>`) || !strings.Contains(timeline.body, `id="search"`) {
		t.Errorf("the timeline doesn't show build 5's commit %s or the search", sha)
	}

	// A query that names nothing, or a URL that is no revision, says so.
	if a := get(t, c, s.url+"/ui/apps/prod/api/-/releases?q=build"); a.status != 404 || !strings.Contains(a.body, "7 or more hex digits") {
		t.Errorf("a query that names nothing: %d\n%s", a.status, a.body)
	}
	if a := get(t, c, s.url+"/ui/apps/prod/api/-/releases/zzz"); a.status != 400 {
		t.Errorf("a release URL that is no revision: %d", a.status)
	}
	if a := get(t, c, s.url+"/ui/apps/prod/api/-/releases/deadbeefdead"); a.status != 404 || !strings.Contains(a.body, "prod/api@deadbeefdead not found") {
		t.Errorf("an unknown commit: %d", a.status)
	}
}

// TestSearchListsEveryMatch: a digest two releases share (the same bytes
// published again) lists both on the timeline, rather than guessing.
func TestSearchListsEveryMatch(t *testing.T) {
	st := storetest.New(t, true).Store(t, "")
	var gens []int64
	for _, v := range []string{"one", "two", "one"} {
		rel, err := render.AssembleStream("cm.yaml", strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: "+v+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Publish(t.Context(), "prod/web", store.Publication{Data: rel.Bytes, Resources: rel.Resources()})
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, res.Generation)
	}
	first, err := st.Stat(t.Context(), store.Ref{App: "prod/web", Generation: gens[0]})
	if err != nil {
		t.Fatal(err)
	}
	s, c := servePages(t, st)
	a := get(t, c, s.url+"/ui/apps/prod/web/-/releases?q="+url.QueryEscape(first.Digest))
	if a.status != 200 || !strings.Contains(a.body, "2 releases match") {
		t.Fatalf("a digest two releases share: %d\n%s", a.status, a.body)
	}
	for i, g := range gens {
		if has := strings.Contains(a.body, fmt.Sprintf("/ui/apps/prod/web/-/releases/%d\"", g)); has != (i != 1) {
			t.Errorf("release %d (generation %d) listed: %v", i, g, has)
		}
	}
}

// TestReleaseURLOfDigitsAlone: a release URL ending in digits that name
// no generation is read as a commit's prefix, as Argo CD's History shows
// 7 digits of it (decimal alone for about 1 commit in 27), or else is
// no release at all.
func TestReleaseURLOfDigitsAlone(t *testing.T) {
	st := storetest.New(t, true).Store(t, "")
	var short, want string
	seen := map[string]bool{}
	for i := 0; short == "" && i < 400; i++ {
		rel, err := render.AssembleStream("cm.yaml", strings.NewReader(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  build: %q\n", fmt.Sprint(i))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Publish(t.Context(), "prod/web", store.Publication{Data: rel.Bytes, Resources: rel.Resources()}); err != nil {
			t.Fatal(err)
		}
		if i%20 != 19 {
			continue
		}
		hist, err := st.History(t.Context(), "prod/web", store.HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(hist)
		shas, err := gitview.Chain(st.Location(), hist)
		if err != nil {
			t.Fatal(err)
		}
		for j, sha := range shas {
			seen[sha[:7]] = true
			if strings.Trim(sha[:7], "0123456789") == "" {
				short, want = sha[:7], fmt.Sprintf("/ui/apps/prod/web/-/releases/%d", hist[j].Generation)
			}
		}
	}
	if short == "" {
		t.Fatal("no commit of 400 releases starts with 7 decimal digits")
	}
	s, c := servePages(t, st)
	if a := get(t, c, s.url+"/ui/apps/prod/web/-/releases/"+short); a.status != 303 || a.header.Get("Location") != want {
		t.Errorf("releases/%s: %d to %q, want a redirect to %s", short, a.status, a.header.Get("Location"), want)
	}
	unknown := "9999999"
	for n := 9999998; seen[unknown]; n-- {
		unknown = fmt.Sprint(n)
	}
	if a := get(t, c, s.url+"/ui/apps/prod/web/-/releases/"+unknown); a.status != 404 || !strings.Contains(a.body, "prod/web@"+unknown+" not found") {
		t.Errorf("releases/%s, no generation nor commit: %d\n%s", unknown, a.status, a.body)
	}
}
