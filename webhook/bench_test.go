package webhook_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render/sopstest"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store/storetest"
)

// BenchmarkManifests measures GET /-/manifests of a release of 200 objects,
// 20 of them SOPS-encrypted Secrets, through HTTP: cold (cache off: read,
// verify, decrypt, validate every time) and cached (one attributes request),
// at concurrency 1 and 64. Concurrent cold requests for the same release
// share one render, as they do in production.
func BenchmarkManifests(b *testing.B) {
	keys := sopstest.NewAgeKeys(b, 1)
	dec, err := secrets.NewDecrypter(sopstest.KeyFile(keys...))
	if err != nil {
		b.Fatal(err)
	}
	var stream strings.Builder
	for i := range 200 {
		if i > 0 {
			stream.WriteString("---\n")
		}
		if i%10 == 0 {
			stream.Write(sopstest.EncryptSecret(b, secret(fmt.Sprintf("s%d", i), "hunter2"), keys[0].Recipient().String()))
		} else {
			stream.WriteString(configMap(fmt.Sprintf("cm%d", i), strings.Repeat("x", 200)))
		}
	}
	bucket := storetest.New(b, true)
	for _, mode := range []struct {
		name  string
		cache int64
	}{{"cold", 0}, {"cached", 64 << 20}} {
		br := serveBridgeWithCache(b, bucket, dec, mode.cache)
		br.publish(b, "prod/big", stream.String())
		for _, conc := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/concurrency=%d", mode.name, conc), func(b *testing.B) {
				if r := br.get(b, "/v1/apps/prod/big/-/manifests", pluginToken); r.status != 200 || !strings.Contains(r.body, "hunter2") {
					b.Fatalf("%d %s", r.status, r.body)
				}
				b.SetParallelism(max(1, conc/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if r := br.get(b, "/v1/apps/prod/big/-/manifests", pluginToken); r.status != 200 {
							b.Errorf("%d %s", r.status, r.body)
						}
					}
				})
			})
		}
	}
}
