package store_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
)

// BenchmarkPublish measures an uncontended publish to an app with a long
// history. The requests/op metric is the protocol's promise: 2 (read the
// head's attributes, write), whatever the length of the history.
func BenchmarkPublish(b *testing.B) {
	for _, history := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			tb := storetest.New(b, true)
			s := tb.Store(b, "")
			app := "prod/payments"
			// Build the history directly in the emulator: the point is the
			// cost of the next publish, not of the 10,000 before it.
			for n := 1; n <= history; n++ {
				data := manifest(app, n)
				tb.Server.CreateObject(fakestorage.Object{
					ObjectAttrs: fakestorage.ObjectAttrs{
						BucketName: storetest.BucketName, Name: app + "/manifests.yaml", Generation: int64(n),
						ContentType: store.ContentType,
						Metadata:    map[string]string{"bucketops-digest": store.Digest(data), "bucketops-sequence": strconv.Itoa(n)},
					},
					Content: data,
				})
			}
			if hist, err := s.History(b.Context(), app, store.HistoryOptions{Limit: 1}); err != nil || hist[0].Sequence != uint64(history) {
				b.Fatalf("history not built: %v %v", hist, err)
			}
			before := tb.Requests.Load()
			b.ResetTimer()
			for i := range b.N {
				n := history + 1 + i
				res, err := s.Publish(b.Context(), app, pub(app, n))
				if err != nil || res.Unchanged {
					b.Fatalf("publish %d: %+v %v", n, res, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(tb.Requests.Load()-before)/float64(b.N), "requests/op")
		})
	}
}
