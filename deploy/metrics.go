package deploy

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	events          *prometheus.CounterVec
	latency         prometheus.Histogram
	finalizeLatency prometheus.Histogram
	argoErrors      *prometheus.CounterVec
	polls           *prometheus.CounterVec
	nudges          prometheus.Counter
	triggers        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, pending func() float64) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_events_total",
			Help: "Release events by source (push, pull, poll) and outcome (accepted, duplicate, ignored, malformed, rejected).",
		}, []string{"source", "outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bucketops_notify_to_refresh_seconds",
			Help:    "From the bridge receiving the event of a generation (notification or poll) to Argo CD's answer to the refresh for it (once per refresh, failed attempts not counted).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		finalizeLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bucketops_finalize_to_refresh_seconds",
			Help:    "From a generation's write in the bucket (its object's time) to Argo CD's answer to the refresh for it: notification delivery included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
		}),
		nudges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bucketops_sync_nudges_total",
			Help: "Refreshes sent because a sync the bridge requested hadn't started after --argocd-nudge-after (argo-cd#18500).",
		}),
		triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_argocd_triggers_total",
			Help: "What the bridge asked of Argo CD for a release, per Application: refresh, sync (an automated Application, --sync-automated), generate (its manifests asked for before that sync, --generate-first), fallback_refresh (after a sync that didn't deploy the release).",
		}, []string{"trigger"}),
		argoErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_argocd_errors_total",
			Help: "Failed Argo CD calls by call (refresh, sync, get_manifests, list, watch) and gRPC code.",
		}, []string{"call", "code"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketops_polls_total",
			Help: "Bucket polls by outcome (ok, error).",
		}, []string{"outcome"}),
	}
	pendingGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bucketops_apps_pending",
		Help: "Apps with a generation not yet refreshed in Argo CD.",
	}, pending)
	for _, c := range []prometheus.Collector{m.events, m.latency, m.finalizeLatency, m.argoErrors, m.polls, m.nudges, m.triggers, pendingGauge} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
