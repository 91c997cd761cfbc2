package webhook_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

// gauged is the real decrypter, counting the renders running at once.
type gauged struct {
	*secrets.Decrypter
	running, peak atomic.Int64
}

func (g *gauged) Render(data []byte, opts secrets.Options) (secrets.Output, error) {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	time.Sleep(20 * time.Millisecond) // long enough for the others to pile up
	return g.Decrypter.Render(data, opts)
}

// Hole 5 of the review: cold renders were unbounded in number, each
// needing many times its release's size. Admitted by weight, no more run
// at once than the budget holds, and a release larger than the whole
// budget still renders, alone.
func TestColdRendersAreAdmittedByMemory(t *testing.T) {
	dec, err := secrets.NewDecrypter(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &gauged{Decrypter: dec}
	const size = 256 << 10
	b := serveBridgeConfig(t, storetest.New(t, true), nil, func(c *webhook.Config) {
		c.Renderer = g
		c.CacheBytes = 0
		// Room for two releases of a little more than size, not three.
		c.Memory = memory.NewBudget(2*memory.Cost(size) + memory.Cost(size)/2)
	})
	const apps = 8
	for i := range apps {
		b.publish(t, fmt.Sprintf("prod/app%d", i), configMap("big", strings.Repeat("x", size)))
	}
	var wg sync.WaitGroup
	for i := range apps {
		wg.Go(func() {
			if r := b.get(t, fmt.Sprintf("/v1/apps/prod/app%d/-/manifests", i), pluginToken); r.status != 200 {
				t.Errorf("app%d: %d %s", i, r.status, r.body)
			}
		})
	}
	wg.Wait()
	if p := g.peak.Load(); p != 2 {
		t.Errorf("%d renders of %d KiB ran at once with memory for 2", p, size>>10)
	}

	// Larger than the whole budget: it waits for the others, then runs.
	huge := serveBridgeConfig(t, b.bucket, nil, func(c *webhook.Config) {
		c.CacheBytes = 0
		c.Memory = memory.NewBudget(memory.Cost(size) / 2)
	})
	if r := huge.get(t, "/v1/apps/prod/app0/-/manifests", pluginToken); r.status != 200 {
		t.Errorf("a release larger than the render budget: %d %s", r.status, r.body)
	}
}

// A render that can't get memory within the request's time answers 503
// with a reason Argo CD shows and retries, not a hang.
func TestRenderWaitingForMemoryGivesUp(t *testing.T) {
	dec, err := secrets.NewDecrypter(nil)
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	slow := &blocking{Decrypter: dec, block: block, started: make(chan struct{}, 1)}
	b := serveBridgeConfig(t, storetest.New(t, true), nil, func(c *webhook.Config) {
		c.Renderer = slow
		c.CacheBytes = 0
		c.Memory = memory.NewBudget(memory.Cost(1))
		c.RequestTimeout = 300 * time.Millisecond
	})
	b.publish(t, "prod/a", configMap("a", "1"))
	b.publish(t, "prod/b", configMap("b", "1"))
	done := make(chan response)
	go func() { done <- b.get(t, "/v1/apps/prod/a/-/manifests", pluginToken) }()
	<-slow.started
	r := b.get(t, "/v1/apps/prod/b/-/manifests", pluginToken)
	if r.status != 503 || r.reason(t) != "render_busy" || !strings.Contains(r.body, "--render-memory") {
		t.Errorf("a render with no memory left: %d %s; want 503 render_busy naming --render-memory", r.status, r.body)
	}
	close(block)
	<-done
}

// blocking is the real decrypter, held until block closes.
type blocking struct {
	*secrets.Decrypter
	block   chan struct{}
	started chan struct{}
}

func (b *blocking) Render(data []byte, opts secrets.Options) (secrets.Output, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.block
	return b.Decrypter.Render(data, opts)
}
