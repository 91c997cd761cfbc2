package ui_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
)

// memory is an app's history held in memory, through the interface the
// pages read: publishing 10,000 releases through the emulator takes
// minutes. Heads and reads still cost what the cache can't save.
type memory struct {
	app  string
	rels []store.Release // newest first
}

func (m *memory) Head(context.Context, string) (store.Release, error) { return m.rels[0], nil }
func (m *memory) History(context.Context, string, store.HistoryOptions) ([]store.Release, error) {
	return append([]store.Release(nil), m.rels...), nil
}
func (m *memory) List(context.Context, string) ([]store.Release, error) { return m.rels[:1], nil }
func (m *memory) Read(context.Context, store.Ref) (store.Release, []byte, error) {
	return store.Release{}, nil, store.ErrNotFound
}

// serve returns a logged-in client of the pages over src.
func serve(b *testing.B, src ui.Releases) (*http.Client, string) {
	u, err := ui.New(ui.Config{Releases: src, Location: store.Location{Bucket: "b"}, Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(tok string) bool { return tok == token }, SessionSecret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(u.Handler())
	b.Cleanup(srv.Close)
	c := client(b)
	resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return c, srv.URL
}

// BenchmarkTimeline is a page of the timeline of an app with 10,000
// releases, warm: the listing is cached by the head's generation, so a page
// costs the head's attributes (nothing here) and rendering 50 rows.
func BenchmarkTimeline(b *testing.B) {
	m := &memory{app: "prod/big"}
	for i := 10_000; i >= 1; i-- {
		m.rels = append(m.rels, store.Release{App: "prod/big", Generation: int64(1764800000000000 + i), Time: time.Unix(1764800000+int64(i), 0),
			Sequence: uint64(i), Kind: "release", Author: "ci-bot", Message: fmt.Sprintf("build %d", i), Digest: "sha256:00", Current: i == 10_000})
	}
	c, base := serve(b, m)
	for _, p := range []int{1, 100, 200} {
		b.Run(fmt.Sprintf("page=%d", p), func(b *testing.B) {
			u := fmt.Sprintf("%s/ui/apps/prod/big/-/releases?page=%d", base, p)
			if a := get(b, c, u); a.status != 200 {
				b.Fatalf("%d", a.status)
			}
			for b.Loop() {
				if a := get(b, c, u); a.status != 200 {
					b.Fatalf("%d", a.status)
				}
			}
		})
	}
}

// BenchmarkDiff is the diff page of two releases of 200 objects, 20 of them
// SOPS-encrypted Secrets, that differ in a tenth of their ConfigMaps and
// every Secret, read from the emulator: reads with digest checks, parsing,
// redaction and 40 unified diffs.
func BenchmarkDiff(b *testing.B) {
	tb := storetest.New(b, true)
	st := tb.Store(b, "")
	keys := sopstest.NewAgeKeys(b, 1)
	var gens []int64
	for v := range 2 {
		var s strings.Builder
		for i := range 200 {
			if i > 0 {
				s.WriteString("---\n")
			}
			if i%10 == 0 {
				s.Write(sopstest.EncryptSecret(b, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s%d\n  namespace: pay\nstringData:\n  password: pw-%d-%d\n", i, i, v), keys[0].Recipient().String()))
				continue
			}
			value := "same"
			if i%10 == 5 {
				value = fmt.Sprint(v)
			}
			fmt.Fprintf(&s, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\n  namespace: pay\ndata:\n  value: %q\n  other: %q\n", i, value, strings.Repeat("x", 100))
		}
		rel, err := render.AssembleStream("r.yaml", strings.NewReader(s.String()))
		if err != nil {
			b.Fatal(err)
		}
		res, err := st.Publish(context.Background(), "prod/big", store.Publication{Data: rel.Bytes, Resources: rel.Resources()})
		if err != nil {
			b.Fatal(err)
		}
		gens = append(gens, res.Generation)
	}
	c, base := serve(b, st)
	u := fmt.Sprintf("%s/ui/apps/prod/big/-/diff?from=%d&to=%d", base, gens[0], gens[1])
	if a := get(b, c, u); a.status != 200 || !strings.Contains(a.body, "0 added, 0 removed, 40 changed, 160 unchanged") {
		b.Fatalf("%d %s", a.status, pageText(a.body))
	}
	for b.Loop() {
		get(b, c, u)
	}
}
