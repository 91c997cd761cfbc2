package cache_test

import (
	"sync"
	"testing"

	"github.com/bucketops/bucketops/cache"
)

func TestLRU(t *testing.T) {
	type step struct {
		add  string // key to add, weighing size
		size int64
		get  string // key to read, marking it used
	}
	for _, tc := range []struct {
		name   string
		budget int64
		steps  []step
		kept   []string
		gone   []string
		bytes  int64
	}{
		{"values that fit are all kept", 30, []step{{add: "a", size: 10}, {add: "b", size: 10}, {add: "c", size: 10}},
			[]string{"a", "b", "c"}, nil, 30},
		{"the least recently added goes first when the budget is exceeded", 30, []step{{add: "a", size: 10}, {add: "b", size: 10}, {add: "c", size: 10}, {add: "d", size: 10}},
			[]string{"b", "c", "d"}, []string{"a"}, 30},
		{"a value read is kept over one added before it", 30, []step{{add: "a", size: 10}, {add: "b", size: 10}, {add: "c", size: 10}, {get: "a"}, {add: "d", size: 10}},
			[]string{"a", "c", "d"}, []string{"b"}, 30},
		{"one large value evicts several small ones", 30, []step{{add: "a", size: 10}, {add: "b", size: 10}, {add: "c", size: 10}, {add: "d", size: 25}},
			[]string{"d"}, []string{"a", "b", "c"}, 25},
		{"a value larger than the budget is not kept, and evicts nothing", 30, []step{{add: "a", size: 10}, {add: "big", size: 31}},
			[]string{"a"}, []string{"big"}, 10},
		{"adding a key again weighs it anew", 30, []step{{add: "a", size: 10}, {add: "b", size: 10}, {add: "a", size: 20}},
			[]string{"a", "b"}, nil, 30},
		{"a key grown past the budget is dropped", 30, []step{{add: "a", size: 10}, {add: "b", size: 10}, {add: "a", size: 40}},
			[]string{"b"}, []string{"a"}, 10},
		{"a budget of 0 keeps nothing, not even a value weighed 0", 0, []step{{add: "a", size: 0}, {add: "b", size: 10}},
			nil, []string{"a", "b"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cache.New[string, string](tc.budget)
			for _, s := range tc.steps {
				if s.add != "" {
					c.Add(s.add, "value of "+s.add, s.size)
				} else {
					c.Get(s.get)
				}
			}
			for _, k := range tc.kept {
				if v, ok := c.Get(k); !ok || v != "value of "+k {
					t.Errorf("%s: %q %v, want it kept", k, v, ok)
				}
			}
			for _, k := range tc.gone {
				if _, ok := c.Get(k); ok {
					t.Errorf("%s is kept, want it gone", k)
				}
			}
			if c.Bytes() != tc.bytes || c.Len() != len(tc.kept) {
				t.Errorf("holds %d bytes in %d values, want %d in %d", c.Bytes(), c.Len(), tc.bytes, len(tc.kept))
			}
		})
	}
}

// Many goroutines adding and reading never take the LRU past its budget
// (-race checks the locking).
func TestLRUConcurrent(t *testing.T) {
	c := cache.New[int, []byte](1000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := (g*500 + i) % 97
				c.Add(k, make([]byte, k), int64(k+1))
				c.Get((k * 7) % 97)
				if b := c.Bytes(); b > 1000 {
					t.Errorf("%d bytes held, budget 1000", b)
					return
				}
			}
		})
	}
	wg.Wait()
	if c.Bytes() > 1000 || c.Len() == 0 {
		t.Errorf("%d bytes in %d values, want some within 1000", c.Bytes(), c.Len())
	}
}
