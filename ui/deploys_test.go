package ui_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

// record is a Deploys that answers a fixed record of Argo CD.
type record struct {
	ds  deploy.Deploys
	err error
}

func (r *record) Deploys(_ context.Context, app string) (deploy.Deploys, error) {
	if r.err != nil {
		return deploy.Deploys{}, r.err
	}
	if app != r.ds.App {
		return deploy.Deploys{App: app, Applications: []deploy.ApplicationDeploys{}}, nil
	}
	return r.ds, nil
}

// servePagesWith serves st's pages with deploys, and returns their URL
// and a logged-in client.
func servePagesWith(t *testing.T, st *store.Store, deploys ui.Deploys) (string, *http.Client) {
	t.Helper()
	u, err := ui.New(ui.Config{Releases: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler), Deploys: deploys,
		Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	c := client(t)
	(&site{url: srv.URL}).login(t, c)
	return srv.URL, c
}

func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// The timeline, the release page and the as-of page show what Argo CD's
// record says of each release: where and when it was live, refused, never
// deployed, or older than what Argo CD keeps.
func TestPagesShowDeploys(t *testing.T) {
	st := storetest.New(t, true).Store(t, "")
	const app = "prod/payments"
	var rels []store.Release
	for i := range 5 {
		res, err := st.Publish(t.Context(), app, store.Publication{Data: fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  v: %q\n", fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		rel, err := st.Stat(t.Context(), store.Ref{App: app, Generation: res.Generation})
		if err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
		time.Sleep(20 * time.Millisecond)
		if i == 2 {
			// Argo CD's times have whole seconds: what comes next is
			// published a second after release 2 and release 1's deploy.
			time.Sleep(1100 * time.Millisecond)
		}
	}
	// payments-prod keeps 2 deploys (full): release 1, then release 2
	// ten seconds after it was published. Argo CD refuses release 3;
	// release 4 ran nowhere; release 0 is older than the deploys kept.
	d1, d2 := rels[1].Time.Add(5*time.Millisecond), rels[2].Time.Add(10*time.Second)
	ds := deploy.Deploys{App: app, At: d2.Add(time.Minute), ArgoCDNamespace: "argocd", Applications: []deploy.ApplicationDeploys{{
		Name: "payments-prod", Namespace: "argocd", HistoryLimit: 2, HistoryFull: true,
		Deploys: []deploy.Interval{
			{Generation: rels[1].Generation, HistoryID: 7, DeployedAt: d1, Until: &d2},
			{Generation: rels[2].Generation, HistoryID: 8, DeployedAt: d2},
		},
		Refused: &deploy.Refusal{Generation: rels[3].Generation, Message: fmt.Sprintf("bucketops: %s@%d: untrusted_release (403): no signature", app, rels[3].Generation)},
	}}}
	base, cl := servePagesWith(t, st, &record{ds: ds})

	t.Run("the timeline has each release's deploys", func(t *testing.T) {
		a := get(t, cl, base+"/ui/apps/"+app+"/-/releases")
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, pageText(a.body))
		}
		cells := deployCells(a.body)
		want := []string{ // newest first
			"never deployed",
			"refused by Argo CD on payments-prod: " + ds.Applications[0].Refused.Message,
			"live on payments-prod since " + clock(d2) + " (now)",
			"live on payments-prod from " + clock(d1) + " to " + clock(d2),
			"older than what Argo CD keeps (the last 2 deploys of each Application)",
		}
		if fmt.Sprint(cells) != fmt.Sprint(want) {
			t.Errorf("deploy column\n%q, want\n%q", cells, want)
		}
	})

	t.Run("the release page has its deploys", func(t *testing.T) {
		a := get(t, cl, fmt.Sprintf("%s/ui/apps/%s/-/releases/%d", base, app, rels[1].Generation))
		if a.status != 200 || !strings.Contains(a.body, `<ul id="deploys"><li>live on payments-prod from `+clock(d1)+" to "+clock(d2)+"</li></ul>") {
			t.Errorf("%d %s", a.status, pageText(a.body))
		}
	})

	t.Run("live at a time between a publish and its deploy is the older release, the head the newer", func(t *testing.T) {
		at := rels[2].Time.Add(500 * time.Millisecond) // release 2 published, deployed 9.5 s later
		a := get(t, cl, base+"/ui/asof?prefix=prod&t="+url.QueryEscape(at.Format(time.RFC3339Nano)))
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, pageText(a.body))
		}
		head := regexp.MustCompile(`class="asof-release" href="[^"]*/(\d+)"`).FindStringSubmatch(a.body)
		live := regexp.MustCompile(`payments-prod: <a class="live-release" href="[^"]*/(\d+)">`).FindStringSubmatch(a.body)
		if head == nil || head[1] != fmt.Sprint(rels[2].Generation) {
			t.Errorf("head of the bucket: %v, want %d", head, rels[2].Generation)
		}
		if live == nil || live[1] != fmt.Sprint(rels[1].Generation) {
			t.Errorf("live in the cluster: %v, want %d\n%s", live, rels[1].Generation, a.body)
		}
		if !strings.Contains(a.body, "<em>head of the bucket</em>") || !strings.Contains(a.body, "<em>live in the cluster</em>") {
			t.Error("the page doesn't say which answer is which")
		}
		// Before the oldest deploy Argo CD keeps, it doesn't say.
		a = get(t, cl, base+"/ui/asof?prefix=prod&t="+url.QueryEscape(rels[0].Time.Format(time.RFC3339Nano)))
		if !strings.Contains(a.body, "payments-prod: older than what Argo CD keeps") {
			t.Errorf("as of release 0: %s", a.body)
		}
	})
}

// deployCells returns the timeline's deploy column, a cell's lines joined
// by " | ".
func deployCells(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?s)<td class="deploys">(.*?)</td>`).FindAllStringSubmatch(body, -1) {
		var lines []string
		for _, l := range regexp.MustCompile(`<div class="deploy">(.*?)</div>`).FindAllStringSubmatch(m[1], -1) {
			lines = append(lines, html.UnescapeString(l[1]))
		}
		out = append(out, strings.Join(lines, " | "))
	}
	return out
}

// Without Argo CD, or before its Applications are loaded, the pages say
// deploys are unknown; they never guess.
func TestPagesWithoutArgoCDSayDeploysAreUnknown(t *testing.T) {
	for _, c := range []struct {
		name    string
		deploys ui.Deploys
		want    string
	}{
		{"no Argo CD", nil, "deploys unknown (no Argo CD)"},
		{"the index loading", &record{err: deploy.ErrIndexLoading}, "deploys unknown for now: the bridge is still loading Argo CD&#39;s Applications"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := storetest.New(t, true).Store(t, "")
			res, err := st.Publish(t.Context(), "prod/payments", store.Publication{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n")})
			if err != nil {
				t.Fatal(err)
			}
			base, cl := servePagesWith(t, st, c.deploys)
			for _, p := range []string{
				"/ui/apps/prod/payments/-/releases",
				fmt.Sprintf("/ui/apps/prod/payments/-/releases/%d", res.Generation),
				"/ui/asof?t=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)),
			} {
				a := get(t, cl, base+p)
				if a.status != 200 || !strings.Contains(a.body, c.want) || strings.Contains(a.body, "never deployed") {
					t.Errorf("%s: %d, want %q\n%s", p, a.status, c.want, pageText(a.body))
				}
			}
		})
	}
}
