package stack

// The processes' metrics, parsed once, by expfmt: a waterline process's /metrics
// (prometheus-client's OpenMetrics text, which expfmt's text parser reads: a counter's
// `_total` series becomes an untyped family of that name, `# EOF` is a comment), a
// kube-scheduler process's /metrics, or the in-process kube-scheduler's and the
// Waterline plugin's registry (component-base's legacy registry, what kube-scheduler's
// /metrics would serve). Series are named as the exposition names them, `_total`,
// `_sum`, `_count` and `_bucket` included.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Gatherer reads a registry's metric families.
type Gatherer func() ([]*dto.MetricFamily, error)

// Legacy reads this test process's registry: the in-process kube-scheduler and the
// Waterline plugin.
func Legacy() ([]*dto.MetricFamily, error) { return legacyregistry.DefaultGatherer.Gather() }

// Scrape reads the Prometheus text at url (a /metrics endpoint).
func Scrape(url string) Gatherer {
	return func() ([]*dto.MetricFamily, error) {
		resp, err := httpc.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %s", url, resp.Status)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", url, err)
		}
		out := make([]*dto.MetricFamily, 0, len(families))
		for _, mf := range families {
			out = append(out, mf)
		}
		return out, nil
	}
}

// Admin reads a waterline process's http://admin/metrics.
func Admin(admin string) Gatherer { return Scrape("http://" + admin + "/metrics") }

// Sample is one series of an exposition: its labels and value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples are the series named name (as exposed: a histogram's `x_count`, `x_sum` and
// `x_bucket` with its `le`, a summary's `x_count` and `x_sum`) whose labels include every
// name=value pair of labels; an `le` is compared as a number.
func Samples(g Gatherer, name string, labels ...string) ([]Sample, error) {
	mfs, err := g()
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, mf := range mfs {
		for _, s := range exposed(mf, name) {
			if hasLabels(s.Labels, labels) {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// exposed are mf's series named name, as the text format writes them.
func exposed(mf *dto.MetricFamily, name string) []Sample {
	family := mf.GetName()
	var out []Sample
	add := func(m *dto.Metric, v float64, extra ...string) {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		out = append(out, Sample{Labels: l, Value: v})
	}
	for _, m := range mf.GetMetric() {
		switch mf.GetType() {
		case dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
			if name != family {
				continue
			}
			switch {
			case m.Counter != nil:
				add(m, m.GetCounter().GetValue())
			case m.Gauge != nil:
				add(m, m.GetGauge().GetValue())
			default:
				add(m, m.GetUntyped().GetValue())
			}
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := m.GetHistogram()
			switch name {
			case family + "_count":
				add(m, float64(h.GetSampleCount()))
			case family + "_sum":
				add(m, h.GetSampleSum())
			case family + "_bucket":
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					add(m, float64(b.GetCumulativeCount()), "le", formatLe(b.GetUpperBound()))
				}
				// A registry may leave the +Inf bucket implicit: it is the count.
				if !inf {
					add(m, float64(h.GetSampleCount()), "le", "+Inf")
				}
			}
		case dto.MetricType_SUMMARY:
			sm := m.GetSummary()
			switch name {
			case family + "_count":
				add(m, float64(sm.GetSampleCount()))
			case family + "_sum":
				add(m, sm.GetSampleSum())
			}
		}
	}
	return out
}

func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// hasLabels: have includes every name=value pair of want; `le` values compare as numbers
// (an exposition writes 0.0, 0 or 0e0 for the same bound).
func hasLabels(have map[string]string, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		got, ok := have[want[i]]
		if !ok {
			return false
		}
		if want[i] == "le" {
			a, errA := strconv.ParseFloat(got, 64)
			b, errB := strconv.ParseFloat(want[i+1], 64)
			if errA == nil && errB == nil && a == b {
				continue
			}
		}
		if got != want[i+1] {
			return false
		}
	}
	return true
}

// Sum adds up the Samples; 0 when there are none.
func Sum(g Gatherer, name string, labels ...string) (float64, error) {
	ss, err := Samples(g, name, labels...)
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, s := range ss {
		total += s.Value
	}
	return total, nil
}

// One is the value of the one series Samples finds; 0 when there is none, an error when
// there are several.
func One(g Gatherer, name string, labels ...string) (float64, error) {
	ss, err := Samples(g, name, labels...)
	if err != nil {
		return 0, err
	}
	switch len(ss) {
	case 0:
		return 0, nil
	case 1:
		return ss[0].Value, nil
	}
	return 0, fmt.Errorf("%s %v: %d samples, want one", name, labels, len(ss))
}

// AdminSum is Sum over a waterline process's http://admin/metrics.
func AdminSum(admin, name string, labels ...string) (float64, error) {
	return Sum(Admin(admin), name, labels...)
}

// Histograms returns, for histogram family name, (sum seconds, count) per value of
// keyLabels (joined with "/"), summed over the other labels; empty when the registry
// cannot be read.
func Histograms(g Gatherer, name string, keyLabels ...string) map[string][2]float64 {
	out := map[string][2]float64{}
	mfs, err := g()
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

// MeanSummary is the mean per key between two snapshots of Histograms,
// "key mean X ms over N, ...", keys in order.
func MeanSummary(before, after map[string][2]float64) string {
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

// MeanDurations reads http://admin/metrics and returns "<histogram>{labels} mean X ms
// over N" for every series of every *_seconds histogram (sum / count), the `_seconds`
// left out of the name, in order.
func MeanDurations(admin string) []string {
	mfs, err := Admin(admin)()
	if err != nil {
		return []string{"metrics: " + err.Error()}
	}
	var out []string
	for _, mf := range mfs {
		base, ok := strings.CutSuffix(mf.GetName(), "_seconds")
		if !ok || mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h.GetSampleCount() == 0 {
				continue
			}
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			key := base
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			out = append(out, fmt.Sprintf("%s mean %.2f ms over %d", key, 1000*h.GetSampleSum()/float64(h.GetSampleCount()), h.GetSampleCount()))
		}
	}
	sort.Strings(out)
	return out
}

// WaitAdminMetric waits until metric (summed as AdminSum does) is want on every admin
// address, failing s's test if it never is.
func (s *Stack) WaitAdminMetric(metric string, want float64, admins ...string) {
	s.t.Helper()
	var last []float64
	err := WaitFor(s.ctx, 60*time.Second, 200*time.Millisecond, fmt.Sprintf("%s = %g", metric, want), func() (bool, error) {
		last = last[:0]
		for _, admin := range admins {
			v, err := AdminSum(admin, metric)
			if err != nil {
				return false, err
			}
			last = append(last, v)
			if v != want {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatalf("%v (last %v)", err, last)
	}
}

// ---------------------------------------------------------------- the plugin

// Counter is Sum, -1 when the registry cannot be read.
func Counter(g Gatherer, name string, labels ...string) float64 {
	v, err := Sum(g, name, labels...)
	if err != nil {
		return -1
	}
	return v
}

// PluginCounter sums a counter of the in-process scheduler (e.g.
// waterline_plugin_fail_open_total) over its series whose labels include labels
// (name=value pairs); -1 when the registry cannot be read.
func PluginCounter(name string, labels ...string) float64 {
	return Counter(Legacy, name, labels...)
}

// PluginFailOpens is the in-process plugin's waterline_plugin_fail_open_total.
func PluginFailOpens() float64 { return PluginCounter("waterline_plugin_fail_open_total") }

// PluginHistograms returns rpc -> (sum seconds, count) of
// waterline_plugin_rpc_duration_seconds.
func PluginHistograms(g Gatherer) map[string][2]float64 {
	return Histograms(g, "waterline_plugin_rpc_duration_seconds", "rpc")
}

// WaitPluginRPCsOK (plugin path), after the scorer was restarted: grpc-go
// reconnects with exponential backoff (1 s, 1.6 s, 2.6 s, ...), and until it
// has, every cycle fails open. Schedules probe pods (label probe=true, tiny
// request) one at a time until one is placed without a new fail-open; returns
// how long that took. The probes stay (they are not part of any count).
func (s *Stack) WaitPluginRPCsOK(ns string) time.Duration {
	s.t.Helper()
	t0 := time.Now()
	for i := 0; ; i++ {
		if time.Since(t0) > 90*time.Second {
			s.t.Fatalf("the Waterline plugin still fails open %v after the scorer restart", time.Since(t0).Round(time.Second))
		}
		before := PluginFailOpens()
		name := fmt.Sprintf("probe-%d-%d", time.Now().UnixNano()%1_000_000, i)
		s.CreatePods([]*v1.Pod{NewPod(ns, name, WithLabels("probe", "true"), WithCPU("10m", ""))}, 1)
		s.WaitScheduled(ns, []string{name}, time.Minute)
		if PluginFailOpens() == before {
			d := time.Since(t0)
			s.t.Logf("plugin: RPCs succeed again %v after the scorer came back (%d probe pod(s))", d.Round(time.Millisecond), i+1)
			return d
		}
		time.Sleep(300 * time.Millisecond)
	}
}
