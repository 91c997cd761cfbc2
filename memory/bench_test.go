package memory_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/ui"
	"github.com/bucketops/bucketops/webhook"
)

// deploymentLimit reads the bridge container's resources.limits.memory
// from the base install (deploy/kubernetes/base/deployment.yaml): the
// limit the benchmark runs under is the one users deploy.
func deploymentLimit(b *testing.B) int64 {
	data, err := os.ReadFile("../deploy/kubernetes/base/deployment.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var d appsv1.Deployment
	if err := sigsyaml.Unmarshal(data, &d); err != nil {
		b.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "bridge" {
			return q.Value()
		}
	}
	b.Fatal("deployment.yaml: no memory limit on the bridge container")
	return 0
}

const (
	pluginToken = "plugin-token-0123456789abcdef"
	readerToken = "reader-token-0123456789abcdef"
)

// worstRelease is a release of n bytes at most in the shape that costs
// the most per byte to parse (render's BenchmarkRenderMemory, "keys"):
// ConfigMaps of 100 short keys, a SOPS Secret every 20 objects.
func worstRelease(b *testing.B, n int, recipient string, salt string) []byte {
	if encrypted == nil {
		encrypted = map[int][]byte{}
	}
	var short strings.Builder
	for k := range 100 {
		fmt.Fprintf(&short, "  k%d: v%s%d\n", k, salt, k)
	}
	var stream bytes.Buffer
	for i := 0; ; i++ {
		var doc []byte
		if i%20 == 0 {
			// Each its own encryption: the SOPS MAC covers the name.
			if encrypted[i] == nil {
				encrypted[i] = sopstest.EncryptSecret(b, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s%d\n  namespace: pay\nstringData:\n  password: hunter2\n", i), recipient)
			}
			doc = encrypted[i]
		} else {
			doc = fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\n  namespace: pay\ndata:\n%s", i, short.String())
		}
		// Assembling adds a little (the # Source: line, normalised
		// separators): 4% of room keeps it under n.
		if stream.Len()+len(doc) > n/100*96 {
			break
		}
		if i > 0 {
			stream.WriteString("---\n")
		}
		stream.Write(doc)
	}
	rel, err := render.AssembleStream("release.yaml", &stream)
	if err != nil {
		b.Fatal(err)
	}
	if len(rel.Bytes) > n {
		b.Fatalf("a release of %d bytes, over %d", len(rel.Bytes), n)
	}
	return rel.Bytes
}

// encrypted are the encrypted Secrets of the releases, by index.
var encrypted map[int][]byte

// bridge is the bridge's HTTP surface wired as cmd/bucketops-bridge wires
// it: one render-memory budget for the renders and the pages, the git
// view and the pages behind the API's authentication. Pages wait longer
// for render memory than the bridge's 10 s, so that all 10 are measured.
type bridge struct {
	url   string
	pages *http.Client // logged in to the pages
}

func newBridge(b *testing.B, st *store.Store, keys []byte, budget *memory.Budget) *bridge {
	dec, err := secrets.NewDecrypter(keys)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	tokens := []webhook.Token{webhook.NewToken(webhook.RolePlugin, pluginToken), webhook.NewToken(webhook.RoleReader, readerToken)}
	view, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: log, CacheBytes: 48 << 20})
	if err != nil {
		b.Fatal(err)
	}
	pages, err := ui.New(ui.Config{Releases: st, Location: st.Location(), Logger: log,
		Authenticate:  func(tok string) bool { return webhook.HasRole(tokens, tok, webhook.RoleReader) },
		SessionSecret: webhook.DeriveKey(tokens, "ui sessions", webhook.RoleReader, webhook.RoleAuditor),
		HistoryBytes:  16 << 20, Memory: budget, MemoryWait: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	api, err := webhook.New(webhook.Config{Releases: st, Renderer: dec, Tokens: tokens, Logger: log, Registry: prometheus.NewRegistry(),
		// The render cache is off so that every request renders: the
		// worst case. Its bound (a quarter of the limit) comes on top.
		CacheBytes: 0, Memory: budget, RequestTimeout: 5 * time.Minute,
		Location: st.Location(), Git: view.Handler(), UI: pages.Handler()})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api.Routes())
	b.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {readerToken}, "next": {"/ui/apps"}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return &bridge{url: srv.URL, pages: c}
}

// do sends one request and reads the whole answer, which must be a 200.
func (br *bridge) do(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d (%d bytes)", req.Method, req.URL.Path, resp.StatusCode, n)
	}
	return nil
}

// heapObjects is the heap the program's objects occupy: live ones and
// dead ones the collector hasn't freed yet, which is what the process
// must hold. mapped is all the memory the runtime holds from the OS and
// hasn't given back (heap spans free or in use, stacks, its own
// structures): what a container's limit sees of the Go process.
func heapObjects() (objects, mapped int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64()) - int64(s[2].Value.Uint64())
}

// peakDuring runs fn and returns how far the heap's objects rose above
// what they took before it, and the most memory the runtime held from the
// OS meanwhile (the whole process's, the emulator's bucket included),
// sampled every millisecond.
func peakDuring(fn func()) (objects, mapped int64) {
	runtime.GC()
	baseObjects, _ := heapObjects()
	var topObjects, topMapped atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			o, m := heapObjects()
			if o-baseObjects > topObjects.Load() {
				topObjects.Store(o - baseObjects)
			}
			if m > topMapped.Load() {
				topMapped.Store(m)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	return topObjects.Load(), topMapped.Load()
}

// BenchmarkPeakHeap sends 1 and then 10 concurrent worst-case requests
// per path to a bridge wired as cmd/bucketops-bridge wires it under the
// Deployment's memory limit, and reports the heap's peak above what it
// held before (peak-heap-MiB), the most memory the runtime held from the
// OS, the whole process's (process-MiB), and, for one request, that peak over the
// size of the releases it holds (x-release): what memory.PerByte must
// cover. See docs/benchmarks.md.
func BenchmarkPeakHeap(b *testing.B) {
	// What the bridge does in the base install's pod: the Go runtime's
	// soft limit is 90% of the container's limit and the render memory
	// half of it, as memoryBudgets picks them.
	limit := deploymentLimit(b)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit / 10 * 9))
	budget := memory.NewBudget(limit / 2)

	ctx := context.Background()
	keys := sopstest.NewAgeKeys(b, 1)
	recipient := keys[0].Recipient().String()
	st := storetest.New(b, true).Store(b, "")
	const n = 10
	publish := func(app string, data []byte) store.Result {
		res, err := st.Publish(ctx, app, store.Publication{Data: data, Sequence: uint64(time.Now().UnixNano())})
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	// The largest release anyone can publish, for the renders and the
	// release pages; the largest a diff page compares, twice per app.
	large := worstRelease(b, store.MaxReleaseBytes, recipient, "")
	var diffs [n][2]store.Result
	var largeGens [n]int64 // a release page is addressed by generation
	for i := range n {
		largeGens[i] = publish(fmt.Sprintf("bench/large%d", i), large).Generation
		for j := range 2 {
			diffs[i][j] = publish(fmt.Sprintf("bench/diff%d", i), worstRelease(b, ui.MaxDiffBytes, recipient, fmt.Sprint(j)))
		}
	}
	diffSize := int64(0)
	for j := range 2 {
		rel, err := st.Stat(ctx, store.Ref{App: "bench/diff0", Generation: diffs[0][j].Generation})
		if err != nil {
			b.Fatal(err)
		}
		diffSize += rel.Size
	}
	br := newBridge(b, st, sopstest.KeyFile(keys...), budget)
	api := &http.Client{}

	// The largest upload-pack request the git view takes: all the wants,
	// haves and shallows its caps allow, as little gzip as git sends.
	viewHead, err := br.viewHead("bench/large0")
	if err != nil {
		b.Fatal(err)
	}
	var pack bytes.Buffer
	pkt := func(s string) { fmt.Fprintf(&pack, "%04x%s", len(s)+4, s) }
	pkt("want " + viewHead + " multi_ack_detailed side-band-64k ofs-delta\n")
	for range 255 {
		pkt("want " + viewHead + "\n")
	}
	for i := range 2000 {
		pkt(fmt.Sprintf("shallow %040x\n", i))
	}
	pack.WriteString("0000")
	for i := range 16384 - 2000 {
		pkt(fmt.Sprintf("have %040x\n", i))
	}
	pkt("done\n")
	var packGz bytes.Buffer
	zw := gzip.NewWriter(&packGz)
	zw.Write(pack.Bytes())
	zw.Close()

	paths := []struct {
		name string
		held int64 // bytes of release one request holds
		req  func(i int) (*http.Client, *http.Request)
	}{
		{"manifests", int64(len(large)), func(i int) (*http.Client, *http.Request) {
			r, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/apps/bench/large%d/-/manifests", br.url, i), nil)
			r.Header.Set("Authorization", "Bearer "+pluginToken)
			return api, r
		}},
		{"ui-release", int64(len(large)), func(i int) (*http.Client, *http.Request) {
			r, _ := http.NewRequest("GET", fmt.Sprintf("%s/ui/apps/bench/large%d/-/releases/%d", br.url, i, largeGens[i]), nil)
			return br.pages, r
		}},
		{"ui-diff", diffSize, func(i int) (*http.Client, *http.Request) {
			r, _ := http.NewRequest("GET", fmt.Sprintf("%s/ui/apps/bench/diff%d/-/diff?from=%d&to=%d", br.url, i, diffs[i][0].Generation, diffs[i][1].Generation), nil)
			return br.pages, r
		}},
		{"gitview-upload-pack", int64(pack.Len()), func(i int) (*http.Client, *http.Request) {
			r, _ := http.NewRequest("POST", br.url+"/git/bench/large0.git/git-upload-pack", bytes.NewReader(packGz.Bytes()))
			r.SetBasicAuth("bucketops", readerToken)
			r.Header.Set("Content-Type", "application/x-git-upload-pack-request")
			r.Header.Set("Content-Encoding", "gzip")
			return api, r
		}},
	}

	for _, p := range paths {
		for _, concurrent := range []int{1, n} {
			b.Run(fmt.Sprintf("path=%s/concurrent=%d", p.name, concurrent), func(b *testing.B) {
				var peak, mapped int64
				for range b.N {
					var failed atomic.Value
					o, m := peakDuring(func() {
						var wg sync.WaitGroup
						for i := range concurrent {
							wg.Go(func() {
								if err := br.do(p.req(i)); err != nil {
									failed.Store(err)
								}
							})
						}
						wg.Wait()
					})
					peak, mapped = max(peak, o), max(mapped, m)
					if err, _ := failed.Load().(error); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(peak)/float64(p.held), "x-release")
				b.ReportMetric(float64(mapped)/(1<<20), "process-MiB")
				b.ReportMetric(float64(budget.Total())/(1<<20), "budget-MiB")
			})
		}
	}
}

// viewHead is the git view's commit of app's head, from its ref
// advertisement.
func (br *bridge) viewHead(app string) (string, error) {
	r, _ := http.NewRequest("GET", br.url+"/git/"+app+".git/info/refs?service=git-upload-pack", nil)
	r.SetBasicAuth("bucketops", readerToken)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	i := bytes.Index(body, []byte(" refs/heads/main"))
	if i < 40 {
		return "", fmt.Errorf("no main in %q", body)
	}
	return string(body[i-40 : i]), nil
}
