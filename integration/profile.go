//go:build e2e

package integration

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profileEnv names the directory make bench-argocd writes CPU profiles of
// Argo CD's processes into, one directory per feed, during each feed's
// first burst (BENCH_ARGOCD_PROFILE=DIR): where a feed's CPU goes inside
// a process, which the race's per-process table can't say. Unset, Argo
// CD's profiler stays off, as in its own install.
const profileEnv = "BENCH_ARGOCD_PROFILE"

// profileSlice is the length of one profile: pprof's endpoint profiles
// for a fixed time, so a burst of unknown length is profiled in slices
// that go tool pprof merges (go tool pprof -top DIR/FEED/PROCESS-*).
const profileSlice = 10 * time.Second

// enableProfiler writes the file that turns Argo CD's profiler on (its
// metrics port's /debug/pprof reads it and wants "true") when profiling,
// before any Argo CD process starts; a write that fails stops the stack's
// start with its cause rather than leave every capture failing later.
func (s *stack) enableProfiler() error {
	if os.Getenv(profileEnv) == "" {
		return nil
	}
	if err := os.MkdirAll(s.path("argocd"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(s.profilerFile(), []byte("true"), 0o644)
}

func (s *stack) profilerFile() string { return s.path("argocd", "profiler.enabled") }

// profilerEnv points Argo CD's processes at the file enableProfiler wrote.
func (s *stack) profilerEnv() []string {
	if os.Getenv(profileEnv) == "" {
		return nil
	}
	return []string{"ARGOCD_ENABLE_PROFILER_FILE_PATH=" + s.profilerFile()}
}

// profile captures CPU profiles of every Argo CD process whose metrics
// address is known, slice after slice, into dir, until the returned stop
// is called; stop waits for the slices under way and returns what failed.
func (s *stack) profile(dir string) (stop func() error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() error { return err }
	}
	done := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for name, addr := range s.metrics {
		wg.Go(func() {
			for n := 1; ; n++ {
				if err := captureProfile(addr, filepath.Join(dir, fmt.Sprintf("%s-%03d.pb.gz", name, n))); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	return func() error {
		close(done)
		wg.Wait()
		return errors.Join(errs...)
	}
}

// captureProfile writes one slice of a process's CPU profile to path.
func captureProfile(addr, path string) error {
	client := http.Client{Timeout: profileSlice + 30*time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(profileSlice/time.Second)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
