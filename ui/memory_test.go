package ui_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

// budgetSite is the pages over a bucket, admitted against budget.
func budgetSite(t *testing.T, budget *memory.Budget, wait time.Duration) (*site, func(app string, values int) store.Result) {
	t.Helper()
	st := storetest.New(t, true).Store(t, "")
	seq := 0
	publish := func(app string, values int) store.Result {
		t.Helper()
		seq++
		var b strings.Builder
		for i := range values {
			if i > 0 {
				b.WriteString("---\n")
			}
			fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  namespace: pay\ndata:\n  v: %q\n", i, strings.Repeat(fmt.Sprint(seq), 4000))
		}
		rel, err := render.AssembleStream("release.yaml", strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Publish(context.Background(), app, store.Publication{Data: rel.Bytes, Resources: rel.Resources(), Sequence: uint64(seq)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	u, err := ui.New(ui.Config{
		Releases: st, Location: st.Location(), Logger: slog.New(slog.DiscardHandler),
		Authenticate:  func(tok string) bool { return tok == token },
		SessionSecret: []byte(strings.Repeat("k", 32)),
		Memory:        budget,
		MemoryWait:    wait,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	t.Cleanup(srv.Close)
	return &site{url: srv.URL, store: st}, publish
}

// Issue 24: a diff of two 9 MiB releases cost 474 MiB outside the render
// memory. Above MaxDiffBytes the page refuses, before reading either
// release, and gives the command that diffs them instead; a small diff
// of the same app still works.
func TestDiffOfLargeReleasesIsRefused(t *testing.T) {
	s, publish := budgetSite(t, memory.NewBudget(256<<20), time.Second)
	small := publish("prod/big", 10)
	large := publish("prod/big", ui.MaxDiffBytes/4000+100)
	smaller := publish("prod/big", 20)
	c := client(t)
	s.login(t, c)

	a := get(t, c, fmt.Sprintf("%s/ui/apps/prod/big/-/diff?from=%d&to=%d", s.url, small.Generation, large.Generation))
	cli := fmt.Sprintf("bucketops diff prod/big@%d prod/big@%d", small.Generation, large.Generation)
	if a.status != http.StatusRequestEntityTooLarge || !strings.Contains(html.UnescapeString(a.body), cli) {
		t.Errorf("a diff of a %d MiB release: %d, want 413 naming %q:\n%s", ui.MaxDiffBytes>>20, a.status, cli, a.body)
	}
	a = get(t, c, fmt.Sprintf("%s/ui/apps/prod/big/-/diff?from=%d&to=%d", s.url, small.Generation, smaller.Generation))
	if a.status != http.StatusOK {
		t.Errorf("a diff of two small releases: %d:\n%.500s", a.status, a.body)
	}
}

// The release and diff pages hold whole releases: they wait for the
// bridge's render memory like a render for Argo CD does, and answer 503
// with Retry-After when it stays taken.
func TestPagesWaitForRenderMemory(t *testing.T) {
	budget := memory.NewBudget(memory.Cost(1 << 20))
	s, publish := budgetSite(t, budget, 200*time.Millisecond)
	one := publish("prod/a", 5)
	two := publish("prod/a", 6)
	c := client(t)
	s.login(t, c)
	pages := []string{
		fmt.Sprintf("/ui/apps/prod/a/-/releases/%d", one.Generation),
		fmt.Sprintf("/ui/apps/prod/a/-/diff?from=%d&to=%d", one.Generation, two.Generation),
	}

	// Another request (a render for Argo CD) holds the whole budget.
	held, err := budget.Acquire(t.Context(), time.Second, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		a := get(t, c, s.url+p)
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, "--render-memory") {
			t.Errorf("%s while the render memory is taken: %d Retry-After %q, want 503 with Retry-After naming --render-memory:\n%.500s",
				p, a.status, a.header.Get("Retry-After"), a.body)
		}
	}

	// Given back while a page waits, the page is served.
	// (get may not t.Fatal off the test's goroutine.)
	got := make(chan int, 1)
	go func() {
		resp, err := c.Get(s.url + pages[0])
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case status := <-got:
		t.Fatalf("%s answered %d while the memory was still taken, before its wait ran out", pages[0], status)
	default:
	}
	held()
	if status := <-got; status != http.StatusOK {
		t.Errorf("%s once the memory is free: %d", pages[0], status)
	}
	for _, p := range pages {
		if a := get(t, c, s.url+p); a.status != http.StatusOK {
			t.Errorf("%s with the memory free: %d", p, a.status)
		}
	}
}
