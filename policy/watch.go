package policy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Watcher holds the policy read from a file and reads the file again when
// it changes (a ConfigMap update swaps the mounted file). A file that no
// longer parses keeps the previous policy in force, with an error logged
// and counted: a typo must not open every prefix, nor shut every app.
type Watcher struct {
	path    string
	log     *slog.Logger
	current atomic.Pointer[Policy]
	reloads *prometheus.CounterVec
	rules   prometheus.Gauge

	mu   sync.Mutex
	last []byte // the file's content when last read, whether it parsed or not
}

// NewWatcher loads the policy at path; a file that can't be read or parsed
// is an error: a bridge must not start without the policy it was given.
func NewWatcher(path string, log *slog.Logger, reg prometheus.Registerer) (*Watcher, error) {
	w := &Watcher{
		path: path,
		log:  log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_policy_reloads_total",
			Help: "Reads of the policy file after it changed, by result (ok, or error: the previous policy stays in force).",
		}, []string{"result"}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bucketops_policy_rules",
			Help: "Rules of the policy in force.",
		}),
	}
	for _, c := range []prometheus.Collector{w.reloads, w.rules} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--policy %s: %w", path, err)
	}
	w.set(p, data)
	return w, nil
}

// Current returns the policy in force.
func (w *Watcher) Current() *Policy { return w.current.Load() }

func (w *Watcher) set(p *Policy, data []byte) {
	w.current.Store(p)
	w.last = data
	w.rules.Set(float64(len(p.Rules)))
}

// Reload reads the file once and puts it in force if it changed and
// parses; it reports whether the policy changed.
func (w *Watcher) Reload() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := os.ReadFile(w.path)
	if err == nil && bytes.Equal(data, w.last) {
		return false, nil
	}
	var p *Policy
	if err == nil {
		p, err = Parse(data)
	}
	if err != nil {
		if data != nil {
			w.last = data // logged once per broken version, not every interval
		}
		w.reloads.WithLabelValues("error").Inc()
		w.log.Error("policy file changed but can't be used; the previous policy stays in force", "path", w.path, "error", err, "policy", w.Current().Digest)
		return false, err
	}
	w.set(p, data)
	w.reloads.WithLabelValues("ok").Inc()
	w.log.Info("policy reloaded", "path", w.path, "rules", len(p.Rules), "policy", p.Digest)
	return true, nil
}

// Run reloads the file every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Reload()
		}
	}
}
