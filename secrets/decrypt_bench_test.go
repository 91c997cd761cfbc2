package secrets_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/secrets"
)

// benchRelease is a release of 200 objects, 20 of them Secrets encrypted
// for two age recipients each (a team's key and the bridge's).
func benchRelease(b *testing.B) ([]byte, []byte) {
	ids := newAgeKeys(b, 4)
	var docs []relDoc
	for i := range 180 {
		body := fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-%d\n  namespace: pay\n  labels:\n    app: svc-%d\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: svc-%d\n  template:\n    metadata:\n      labels:\n        app: svc-%d\n    spec:\n      containers:\n        - name: app\n          image: registry.example.com/svc:%d\n          args: [\"--port=8080\", \"--log=json\"]\n          resources:\n            requests: {cpu: 100m, memory: 128Mi}\n", i, i, i, i, i)
		docs = append(docs, relDoc{Source: fmt.Sprintf("deploy/svc-%03d.yaml", i), Body: body})
	}
	for i := range 20 {
		plain := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds-%d\n  namespace: pay\ntype: Opaque\nstringData:\n  username: user-%d\n  password: %s\n  url: postgres://db-%d:5432/pay\n  token: %s\n", i, i, strings.Repeat("p", 32), i, strings.Repeat("t", 64))
		docs = append(docs, relDoc{Source: fmt.Sprintf("secrets/creds-%02d.yaml", i), Body: string(encryptSecret(b, plain, recipientsOf(ids[i%2], ids[2])...))})
	}
	return releaseStream(docs...), keyFile(ids[2:]...)
}

// BenchmarkRender renders one release of 200 objects with 20 encrypted
// Secrets, alone and with 64 renders at once.
func BenchmarkRender(b *testing.B) {
	data, keys := benchRelease(b)
	d, err := secrets.NewDecrypter(keys)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := renderBytes(d, data, false); err != nil {
		b.Fatal(err)
	}
	b.Run("concurrency=1", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := renderBytes(d, data, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("concurrency=64", func(b *testing.B) {
		// RunParallel runs parallelism × GOMAXPROCS goroutines.
		b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := renderBytes(d, data, false); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
