package gitview_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// BenchmarkGitView measures what Argo CD's repo-server costs the bridge:
// the ref advertisement it asks for on every refresh (ls-remote), and the
// fetch after one more release (want the new head, have the previous one),
// at 10 and 10,000 releases, over HTTP on loopback. The history comes from
// an in-memory source (publishing 10,000 releases through the emulator
// takes minutes); a head read costs nothing here, where GCS would add one
// request. It also reports the view's heap per 10,000 releases, and what
// its cache weighs them at (Config.CacheBytes bounds that).
func BenchmarkGitView(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		rels := make([]store.Release, n+1)
		for i := range rels {
			rels[i] = store.Release{App: "prod/app", Generation: int64(1764800000000000 + i), Time: time.Unix(1764800000+int64(i), 0).UTC(),
				Sequence: uint64(i + 1), Kind: "release", Digest: fmt.Sprintf("sha256:%064d", i), Author: "ci@example.com", Message: "release"}
		}
		loc := store.Location{Bucket: "b"}
		src := &growing{all: rels, visible: n}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		v, err := gitview.New(gitview.Config{Source: src, Location: loc, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(v.Handler())
		b.Cleanup(srv.Close)
		get := func() {
			resp, err := http.Get(srv.URL + "/prod/app.git/info/refs?service=git-upload-pack")
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("%v %v", resp, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		get()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.Run(fmt.Sprintf("ls-remote/releases=%d", n), func(b *testing.B) {
			for b.Loop() {
				get()
			}
			if n >= 10_000 {
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n)*10_000/(1<<20), "heap-MiB-per-10k-releases")
				// What the view's cache weighs them at, against the heap.
				b.ReportMetric(float64(v.CachedBytes())/float64(n)*10_000/(1<<20), "cached-MiB-per-10k-releases")
			}
		})
		shas, _ := gitview.Chain(loc, rels)
		src.visible = n + 1
		get()
		body := pkt("want "+shas[n]+" multi_ack_detailed no-done side-band-64k ofs-delta\n") + "0000" +
			pkt("have "+shas[n-1]+"\n") + pkt("done\n")
		b.Run(fmt.Sprintf("fetch-one-more/releases=%d", n), func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Post(srv.URL+"/prod/app.git/git-upload-pack", "application/x-git-upload-pack-request", strings.NewReader(body))
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%v %v", resp, err)
				}
				var out bytes.Buffer
				out.ReadFrom(resp.Body)
				resp.Body.Close()
				if !bytes.Contains(out.Bytes(), []byte("PACK")) {
					b.Fatalf("no pack: %q", out.String())
				}
			}
		})
	}
}

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
