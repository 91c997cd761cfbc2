// Package watch keeps a policy file in force while the bridge runs: it
// reads the file again when it changes and keeps the previous version when
// the new one doesn't parse, with reloads and rules counted in Prometheus.
//
// The contract: Current never returns a policy that failed to parse, and a
// watcher never starts without a policy. It is the bridge's; the CLI reads
// policies with package policy alone and links no metrics.
package watch

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

	"github.com/bucketops/bucketops/policy"
)

// Document is what a Watcher keeps in force: a parsed policy file that
// can say how many rules it holds and which version of the file it is.
type Document interface {
	RuleCount() int
	Version() string
}

// Watcher holds a policy read from a file and reads the file again when
// it changes (a ConfigMap update swaps the mounted file). A file that no
// longer parses keeps the previous policy in force, with an error logged
// and counted: a typo must not open every prefix, nor shut every app. The
// bridge runs one for the tenancy policy and one for the trust policy
// (package provenance), told apart by name in logs and metrics.
type Watcher[T Document] struct {
	name    string
	path    string
	parse   func([]byte) (T, error)
	log     *slog.Logger
	current atomic.Pointer[T]
	reloads *prometheus.CounterVec
	rules   prometheus.Gauge

	mu   sync.Mutex
	last []byte // the file's content when last read, whether it parsed or not
}

// New loads the policy file at path with parse; a file that can't
// be read or parsed is an error: a bridge must not start without the
// policy it was given. name ("tenancy", "trust") labels the metrics.
func New[T Document](name, path string, parse func([]byte) (T, error), log *slog.Logger, reg prometheus.Registerer) (*Watcher[T], error) {
	labels := prometheus.Labels{"policy": name}
	w := &Watcher[T]{
		name:  name,
		path:  path,
		parse: parse,
		log:   log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "bucketops_policy_reloads_total",
			Help:        "Reads of a policy file after it changed, by result (ok, or error: the previous policy stays in force).",
			ConstLabels: labels,
		}, []string{"result"}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "bucketops_policy_rules",
			Help:        "Rules of the policy in force.",
			ConstLabels: labels,
		}),
	}
	for _, c := range []prometheus.Collector{w.reloads, w.rules} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s policy: %w", name, err)
	}
	p, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s policy %s: %w", name, path, err)
	}
	w.set(p, data)
	return w, nil
}

// Current returns the policy in force.
func (w *Watcher[T]) Current() T { return *w.current.Load() }

func (w *Watcher[T]) set(p T, data []byte) {
	w.current.Store(&p)
	w.last = data
	w.rules.Set(float64(p.RuleCount()))
}

// Reload reads the file once and puts it in force if it changed and
// parses; it reports whether the policy changed.
func (w *Watcher[T]) Reload() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := os.ReadFile(w.path)
	if err == nil && bytes.Equal(data, w.last) {
		return false, nil
	}
	var p T
	if err == nil {
		p, err = w.parse(data)
	}
	if err != nil {
		if data != nil {
			w.last = data // logged once per broken version, not every interval
		}
		w.reloads.WithLabelValues("error").Inc()
		w.log.Error("policy file changed but can't be used; the previous policy stays in force", "policy", w.name, "path", w.path, "error", err, "version", w.Current().Version())
		return false, err
	}
	w.set(p, data)
	w.reloads.WithLabelValues("ok").Inc()
	w.log.Info("policy reloaded", "policy", w.name, "path", w.path, "rules", p.RuleCount(), "version", p.Version())
	return true, nil
}

// Run reloads the file every interval until ctx ends.
func (w *Watcher[T]) Run(ctx context.Context, interval time.Duration) {
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

// Tenancy watches the tenancy policy file at path.
func Tenancy(path string, log *slog.Logger, reg prometheus.Registerer) (*Watcher[*policy.Policy], error) {
	return New("tenancy", path, policy.Parse, log, reg)
}
