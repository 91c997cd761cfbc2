package webhook

import (
	"container/list"
	"sync"
)

// cache holds renders by app@generation, least recently used evicted first,
// within a byte budget. Generations are immutable, so entries never go stale.
type cache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	order   *list.List // front: most recently used
	entries map[string]*list.Element
}

type cacheEntry struct {
	key string
	val rendered
}

func newCache(budget int64) *cache {
	return &cache{budget: budget, order: list.New(), entries: map[string]*list.Element{}}
}

func entrySize(key string, v rendered) int64 { return int64(len(key) + len(v.body) + 256) }

func (c *cache) get(key string) (rendered, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return rendered{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).val, true
}

func (c *cache) add(key string, v rendered) {
	size := entrySize(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.budget {
		return // larger than the whole budget: serve it, don't keep it
	}
	if el, ok := c.entries[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, val: v})
	c.used += size
	for c.used > c.budget {
		oldest := c.order.Back()
		e := oldest.Value.(*cacheEntry)
		c.order.Remove(oldest)
		delete(c.entries, e.key)
		c.used -= entrySize(e.key, e.val)
	}
}

func (c *cache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
