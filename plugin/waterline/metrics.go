package waterline

import (
	"sync"

	"google.golang.org/grpc/status"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics go to kube-scheduler's own registry (legacyregistry), so they appear on the
// scheduler's /metrics next to its framework metrics without another port.
var (
	rpcErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "waterline_plugin_rpc_errors_total",
		Help:           "Waterline scorer RPCs that failed, by RPC and gRPC status code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rpc", "code"})

	failOpens = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "waterline_plugin_fail_open_total",
		Help:           "Failed waterline RPCs answered with the fail-open fallback (all nodes pass, equal scores, Reserve ignored).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rpc"})

	rpcDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "waterline_plugin_rpc_duration_seconds",
		Help:           "Latency of waterline scorer RPCs as seen by the scheduler, successful or not.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 14), // 100µs .. ~0.8s
		StabilityLevel: metrics.ALPHA,
	}, []string{"rpc"})

	tlsReloads = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "waterline_plugin_tls_reload_total",
		Help:           "Loads of changed TLS files (tls.caFile, certFile, keyFile) by result: ok (new connections use them) or error (invalid or half-written; the previous ones stay).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerOnce sync.Once
)

// registerMetrics is called from the plugin factory, which runs once per profile.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rpcErrors, failOpens, rpcDuration, tlsReloads)
	})
}

func countError(rpc string, err error) {
	rpcErrors.WithLabelValues(rpc, status.Code(err).String()).Inc()
}
