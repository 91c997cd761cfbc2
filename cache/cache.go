// Package cache owns the bridge's in-memory caches of what it reads from
// the bucket (renders, app histories, git views): values by key within a
// budget of bytes, the least recently used evicted first.
//
// The contract that matters: the bytes an LRU holds, as its caller weighs
// each value, never exceed its budget, whatever readers ask for; a value
// larger than the whole budget is not kept at all. A caller weighs what a
// value holds in memory, so that the budget is a bound on memory an
// operator can set.
package cache

import (
	"container/list"
	"sync"
)

// LRU holds values by key within a budget of bytes, least recently used
// evicted first. It is safe for concurrent use.
type LRU[K comparable, V any] struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	order   *list.List // of *entry[K, V]; front: most recently used
	entries map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

// New returns an LRU that holds at most budget bytes; 0 keeps nothing.
func New[K comparable, V any](budget int64) *LRU[K, V] {
	return &LRU[K, V]{budget: max(budget, 0), order: list.New(), entries: map[K]*list.Element{}}
}

// Get returns key's value and marks it the most recently used.
func (c *LRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Add keeps val under key, weighing size bytes (at least 1), in place of
// any value key had, and evicts the least recently used values until the
// budget holds. A value larger than the whole budget is not kept, and the
// one key had is dropped: the caller serves it, nothing keeps it.
func (c *LRU[K, V]) Add(key K, val V, size int64) {
	size = max(size, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	if size > c.budget {
		return
	}
	c.entries[key] = c.order.PushFront(&entry[K, V]{key: key, val: val, size: size})
	c.used += size
	for c.used > c.budget {
		c.remove(c.order.Back())
	}
}

// Remove drops key's value, if any.
func (c *LRU[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
}

func (c *LRU[K, V]) remove(el *list.Element) {
	e := el.Value.(*entry[K, V])
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.used -= e.size
}

// Bytes returns the bytes held, as their callers weighed them.
func (c *LRU[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Len returns the number of values held.
func (c *LRU[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Budget returns the bytes the LRU may hold.
func (c *LRU[K, V]) Budget() int64 { return c.budget }
