package webhook

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	renders       *prometheus.CounterVec
	renderErrors  *prometheus.CounterVec
	untrusted     *prometheus.CounterVec
	renderSeconds *prometheus.HistogramVec
	cache         *prometheus.CounterVec
	cacheBytes    prometheus.Gauge
	authFailures  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		renders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_renders_total", Help: "Manifest requests answered, by outcome (ok, error).",
		}, []string{"outcome"}),
		renderErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_render_errors_total", Help: "Failed manifest requests by reason (app_not_found, digest_mismatch, no_key, ...).",
		}, []string{"reason"}),
		untrusted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_untrusted_releases_total",
			Help: "Renders of releases that failed signature verification, by problem (missing_signature, unknown_key, gap, ...) and action (refused under require: signed, served under warn).",
		}, []string{"problem", "action"}),
		renderSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bucketops_render_duration_seconds", Help: "Time to answer a successful manifest request, by cache (hit, miss).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"cache"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_render_cache_requests_total", Help: "Successful manifest requests by cache result (hit, miss).",
		}, []string{"result"}),
		cacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bucketops_render_cache_bytes", Help: "Bytes of rendered manifests held in the cache.",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_auth_failures_total", Help: "Requests refused by authentication (unauthenticated, forbidden).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.renders, m.renderErrors, m.untrusted, m.renderSeconds, m.cache, m.cacheBytes, m.authFailures)
	return m
}
