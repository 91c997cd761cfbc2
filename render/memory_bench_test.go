package render_test

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
)

// BenchmarkRenderMemory reports the peak heap one render of a release
// needs, as a multiple of the release's size (x-release), the decryption alone;
// memory's BenchmarkPeakHeap measures whole requests, which memory.Cost counts.
// Two shapes up to each size: ConfigMaps of one 2 KiB value ("values"),
// and ConfigMaps of many short keys ("keys", the worst case: a YAML node
// per few bytes); a SOPS Secret every 20 objects in both.
func BenchmarkRenderMemory(b *testing.B) {
	keys := sopstest.NewAgeKeys(b, 1)
	d, err := secrets.NewDecrypter(sopstest.KeyFile(keys...))
	if err != nil {
		b.Fatal(err)
	}
	var short strings.Builder
	for k := range 100 {
		fmt.Fprintf(&short, "  k%d: v%d\n", k, k)
	}
	for _, shape := range []struct{ name, data string }{
		{"values", fmt.Sprintf("  value: %q\n", strings.Repeat("x", 2048))},
		{"keys", short.String()},
	} {
		for _, size := range []int{1 << 20, 9 << 20} {
			var stream strings.Builder
			for i := 0; stream.Len() < size; i++ {
				if i > 0 {
					stream.WriteString("---\n")
				}
				if i%20 == 0 {
					stream.Write(sopstest.EncryptSecret(b, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s%d\n  namespace: pay\nstringData:\n  password: hunter2\n", i), keys[0].Recipient().String()))
					continue
				}
				fmt.Fprintf(&stream, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\n  namespace: pay\ndata:\n%s", i, shape.data)
			}
			rel, err := render.AssembleStream("release.yaml", strings.NewReader(stream.String()))
			if err != nil {
				b.Fatal(err)
			}
			data := rel.Bytes
			b.Run(fmt.Sprintf("%s/release=%dMiB", shape.name, len(data)>>20), func(b *testing.B) {
				b.ReportAllocs()
				var peak int64
				for range b.N {
					runtime.GC()
					base := heapBytes()
					var top atomic.Int64
					stop := make(chan struct{})
					var wg sync.WaitGroup
					wg.Go(func() {
						t := time.NewTicker(time.Millisecond)
						defer t.Stop()
						for {
							if h := heapBytes() - base; h > top.Load() {
								top.Store(h)
							}
							select {
							case <-stop:
								return
							case <-t.C:
							}
						}
					})
					out, err := d.Render(data, secrets.Options{App: "bench/app"})
					close(stop)
					wg.Wait()
					if err != nil || len(out.Objects) != len(rel.Objects) {
						b.Fatalf("render: %v", err)
					}
					peak = max(peak, top.Load())
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(peak)/float64(len(data)), "x-release")
			})
		}
	}
}

// heapBytes is the heap the program's objects occupy now.
func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
