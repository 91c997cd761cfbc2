package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/store"
)

// policyInterval is how often the policy file is checked for a change: a
// ConfigMap update reaches the pod's volume within a minute or so anyway.
const policyInterval = 10 * time.Second

// memoryBudgets picks the render cache's, cold renders' and the history
// caches' budgets (-1: not given) from the memory the process may use:
// GOMEMLIMIT, else the container's cgroup limit, which then also becomes
// the Go runtime's soft limit (90%), so the collector works harder before
// the kernel kills the pod. Without a limit: 256 MiB of cache, 1 GiB of
// renders and 128 MiB of histories.
func memoryBudgets(cacheBytes, renderMemory, historyBytes int64, log *slog.Logger) (int64, int64, int64) {
	limit := debug.SetMemoryLimit(-1)
	source := "GOMEMLIMIT"
	if limit == math.MaxInt64 {
		limit, source = cgroupMemoryLimit(), "the container's memory limit"
		if limit > 0 {
			debug.SetMemoryLimit(limit / 10 * 9)
		}
	}
	if cacheBytes < 0 {
		cacheBytes = 256 << 20
		if limit > 0 && limit != math.MaxInt64 {
			cacheBytes = limit / 4
		}
	}
	if renderMemory < 0 {
		renderMemory = 1 << 30
		if limit > 0 && limit != math.MaxInt64 {
			renderMemory = limit / 2
		}
	}
	if historyBytes < 0 {
		historyBytes = 128 << 20
		if limit > 0 && limit != math.MaxInt64 {
			historyBytes = max(limit/8, minHistoryBytes)
		}
	}
	if need := memory.Cost(store.MaxReleaseBytes); renderMemory > 0 && renderMemory < need {
		log.Warn("--render-memory is less than a release of the largest size is counted for: such a release renders alone, over the budget", "render_memory", renderMemory, "largest_release_cost", need)
	}
	if limit > 0 && limit != math.MaxInt64 {
		log.Info("memory budgets from "+source, "limit", limit, "cache_bytes", cacheBytes, "render_memory", renderMemory, "history_cache_bytes", historyBytes)
	}
	return cacheBytes, renderMemory, historyBytes
}

// minHistoryBytes is the least --history-cache-bytes: without a history
// cache the git view would build an app's commits on every request.
const minHistoryBytes = 1 << 20

// historySplit divides the history budget between the git view, which
// Argo CD asks on every refresh, and the auditors' pages.
func historySplit(historyBytes int64) (gitview, ui int64) {
	return historyBytes / 4 * 3, historyBytes / 4
}

// cgroupMemoryLimit reads cgroup v2's memory.max (or v1's
// memory.limit_in_bytes); 0 when there is none.
func cgroupMemoryLimit() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		// v1 reports "no limit" as a huge number near MaxInt64.
		if err == nil && v > 0 && v < 1<<50 {
			return v
		}
	}
	return 0
}
