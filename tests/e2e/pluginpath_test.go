package e2e

// Helpers for the plugin path: the Waterline plugin runs inside the test
// process (the in-process kube-scheduler), so its metrics are read straight
// from component-base's legacy registry, where kube-scheduler's /metrics
// would serve them.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
)

// gatherFunc reads a registry: the test process's own (legacyGather: the
// in-process kube-scheduler and its plugin) or a scheduler process's /metrics
// (scrapeGather, the pinned layout of TestThroughput).
type gatherFunc func() ([]*dto.MetricFamily, error)

func legacyGather() ([]*dto.MetricFamily, error) { return legacyregistry.DefaultGatherer.Gather() }

// scrapeGather reads Prometheus text from url (a /metrics endpoint).
func scrapeGather(url string) gatherFunc {
	return func() ([]*dto.MetricFamily, error) {
		resp, err := httpc.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(families))
		for _, mf := range families {
			out = append(out, mf)
		}
		return out, nil
	}
}

// counterIn sums a counter over its label values; labels filters on
// name=value pairs. -1 when the registry cannot be read.
func counterIn(gather gatherFunc, name string, labels ...string) float64 {
	mfs, err := gather()
	if err != nil {
		return -1
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// histogramsIn returns, for histogram name, (sum seconds, count) per value of
// keyLabels (joined with "/"), summed over the other labels.
func histogramsIn(gather gatherFunc, name string, keyLabels ...string) map[string][2]float64 {
	out := map[string][2]float64{}
	mfs, err := gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			var key []string
			for _, l := range keyLabels {
				key = append(key, have[l])
			}
			k := strings.Join(key, "/")
			prev := out[k]
			out[k] = [2]float64{prev[0] + m.GetHistogram().GetSampleSum(), prev[1] + float64(m.GetHistogram().GetSampleCount())}
		}
	}
	return out
}

// pluginCounter sums a plugin counter (e.g. waterline_plugin_fail_open_total)
// of the in-process scheduler over its label values; labels filters on
// name=value pairs.
func pluginCounter(name string, labels ...string) float64 {
	return counterIn(legacyGather, name, labels...)
}

// pluginHistograms returns rpc -> (sum seconds, count) of
// waterline_plugin_rpc_duration_seconds.
func pluginHistograms(gather gatherFunc) map[string][2]float64 {
	return histogramsIn(gather, "waterline_plugin_rpc_duration_seconds", "rpc")
}

// meanSummary: the mean per key between two snapshots of histogramsIn,
// "key mean X ms over N, ...", keys in order.
func meanSummary(before, after map[string][2]float64) string {
	var keys []string
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		sum, n := after[k][0]-before[k][0], after[k][1]-before[k][1]
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s mean %.2f ms over %.0f", k, 1000*sum/n, n))
		}
	}
	return strings.Join(parts, ", ")
}

func pluginFailOpens() float64 { return pluginCounter("waterline_plugin_fail_open_total") }

// waitPluginRPCsOK (plugin path), after the scorer was restarted: grpc-go
// reconnects with exponential backoff (1 s, 1.6 s, 2.6 s, ...), and until it
// has, every cycle fails open. Schedules probe pods (label probe=true, tiny
// request) one at a time until one is placed without a new fail-open; returns
// how long that took. The probes stay (they are not part of any count).
func (s *stack) waitPluginRPCsOK(ns string) time.Duration {
	s.t.Helper()
	t0 := time.Now()
	for i := 0; ; i++ {
		if time.Since(t0) > 90*time.Second {
			s.t.Fatalf("the Waterline plugin still fails open %v after the scorer restart", time.Since(t0).Round(time.Second))
		}
		before := pluginFailOpens()
		name := fmt.Sprintf("probe-%d-%d", time.Now().UnixNano()%1_000_000, i)
		s.createPods([]*v1.Pod{newPod(ns, name, withLabels("probe", "true"), withCPU("10m", ""))}, 1)
		s.waitScheduled(ns, []string{name}, time.Minute)
		if pluginFailOpens() == before {
			d := time.Since(t0)
			s.t.Logf("plugin: RPCs succeed again %v after the scorer came back (%d probe pod(s))", d.Round(time.Millisecond), i+1)
			return d
		}
		time.Sleep(300 * time.Millisecond)
	}
}
