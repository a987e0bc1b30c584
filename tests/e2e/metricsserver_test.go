package e2e

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/waterline/waterline/tests/e2e/stack"
)

// TestMetricsServerBurst: a cluster with metrics-server and no Prometheus. A fake
// metrics-server (stack.MetricsServer: TLS on loopback) is registered as APIService
// v1beta1.metrics.k8s.io behind ExternalName Service kube-system/metrics-server → 127.0.0.1,
// so the real kube-apiserver's aggregation layer proxies NodeMetrics to it; the collector
// runs with --kubeconfig and no Prometheus URL, finds metrics.k8s.io and polls it every
// second. 6 nodes of 8 cores: node-0 and node-1 at 90 % cpu, the others 30-36 %, memory
// 20 % everywhere. A burst of 20 pods must land only on the four cool nodes (cpu
// filterAbove 65), through the extender and through the plugin.
func TestMetricsServerBurst(t *testing.T) { stack.EachPath(t, testMetricsServerBurst) }

func testMetricsServerBurst(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const nodes, pods = 6, 20
	busy := func(i int) float64 {
		if i < 2 {
			return 0.9
		}
		return 0.30 + 0.02*float64(i-2)
	}
	s := stack.New(ctx, t, stack.Options{
		Nodes:         nodes,
		CPUBusy:       busy,
		MemoryUsed:    0.2,
		MetricsServer: true,
		Policy: stack.Policy{
			Metrics: []stack.Metric{stack.CPUAvg5m.WithFilter(65), stack.MemAvg5m},
			Ledger:  true,
		},
		WaitMetrics: true,
	})
	// What the collector holds is what the fake metrics-server said, as percent of
	// allocatable (8 cores, 32 GiB): 90 % on node-0, 30 % on node-2, 20 % memory.
	all, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range s.Nodes {
		got := all[node]
		if math.Abs(got["cpu_usage_avg_5m"]-100*busy(i)) > 0.5 || math.Abs(got["mem_usage_avg_5m"]-20) > 0.5 {
			t.Errorf("%s: collector holds %v, the metrics-server says cpu %.0f %%, memory 20 %%", node, got, 100*busy(i))
		}
	}
	if lists := s.MetricsServer.NodeLists.Load(); lists < 2 {
		t.Errorf("the fake metrics-server served %d NodeMetrics lists, want at least 2 (the registration's and the collector's)", lists)
	}
	// Chosen by itself: the collector was given no Prometheus URL and no --metrics-server.
	if log := s.Collector.Tail(1 << 20); !strings.Contains(log, "answers: node usage from metrics-server") {
		t.Errorf("the collector did not log choosing metrics-server by itself:\n%s", s.Collector.Tail(3000))
	}
	up, err := stack.One(stack.Admin(s.Collector.Admin), "waterline_collector_source_up", "source", "metrics-server")
	if err != nil || up != 1 {
		t.Errorf("waterline_collector_source_up{source=metrics-server} = %v (%v), want 1", up, err)
	}

	s.StartScheduler(s.WaterlineScheduler(path))
	ns := "default"
	counts := s.Burst(ns, "ms-burst", pods, stack.WithCPU("100m", "500m"))
	t.Logf("metrics-server, %s path: %s", path, stack.FmtCounts(counts))
	placed, cool := 0, map[string]int{}
	for node, n := range counts {
		placed += n
		if node != stack.NodeName(0) && node != stack.NodeName(1) {
			cool[node] = n
		} else if n > 0 {
			t.Errorf("%d pods on %s, which metrics-server reports at 90 %% cpu (filterAbove 65)", n, node)
		}
	}
	if placed != pods {
		t.Errorf("%d of %d pods placed", placed, pods)
	}
	if path == stack.PluginPath {
		if lo, hi := stack.MinMax(cool); hi-lo > 3 {
			t.Errorf("plugin path: the ledger should spread the burst over the cool nodes, got %s", stack.FmtCounts(counts))
		}
	}
}
