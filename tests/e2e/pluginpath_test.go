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

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
)

// pluginCounter sums a plugin counter (e.g. waterline_plugin_fail_open_total)
// over its label values; labels filters on name=value pairs.
func pluginCounter(name string, labels ...string) float64 {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
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

// pluginHistograms returns rpc -> (sum seconds, count) of
// waterline_plugin_rpc_duration_seconds.
func pluginHistograms() map[string][2]float64 {
	out := map[string][2]float64{}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "waterline_plugin_rpc_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			rpc := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "rpc" {
					rpc = lp.GetValue()
				}
			}
			out[rpc] = [2]float64{m.GetHistogram().GetSampleSum(), float64(m.GetHistogram().GetSampleCount())}
		}
	}
	return out
}

// pluginRPCSummary: mean plugin RPC latency per RPC between two snapshots.
func pluginRPCSummary(before, after map[string][2]float64) string {
	var rpcs []string
	for k := range after {
		rpcs = append(rpcs, k)
	}
	sort.Strings(rpcs)
	var parts []string
	for _, r := range rpcs {
		sum, n := after[r][0]-before[r][0], after[r][1]-before[r][1]
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s mean %.2f ms over %.0f", r, 1000*sum/n, n))
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
