package webhook

import "github.com/bucketops/bucketops/cache"

// renderCache holds renders by app@generation (and policy version), least
// recently used evicted first, within Config.CacheBytes. Generations are
// immutable, so entries never go stale.
type renderCache = cache.LRU[string, rendered]

func newCache(budget int64) *renderCache { return cache.New[string, rendered](budget) }

// renderSize weighs a render: its body, its key and what else it holds.
func renderSize(key string, v rendered) int64 { return int64(len(key) + len(v.body) + 256) }
