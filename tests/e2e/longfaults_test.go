package e2e

// TestLongFaults: faults held past the stale window, during bursts, on one kube-scheduler
// that serves both paths (RELIABILITY.md "Long faults"). The matrix (faults_test.go) holds
// each fault for about a second, so no sample ages into the stale policy; here the policy's
// periods are 1 s and stale.maxAge 8 s, so each fault reaches the stale policy and the fleet
// breaker (docs/design.md#fleet-staleness-breaker) and is healed well within a minute.
//
// One stack: 6 nodes, node-5 at 90 % cpu (the 65 % filters reject it while waterline
// decides), the others at 10-25 %; the collector reaches Prometheus through a fault proxy.
// One kube-scheduler with two profiles: waterline-scheduler through the extender (the
// extender answers only that profile: --scheduler-names) and waterline-plugin through the
// plugin, so one outage serves both paths. Each fault, in its own namespace:
//
//   - collector-cut-from-prometheus: the proxy black-holes the collector's queries; the
//     scorers keep their stream.
//   - prometheus-killed: Prometheus itself is down, then restarted.
//   - one-query-failing: the memory metric's query fails at evaluation (a many-to-one
//     match Prometheus refuses) while the cpu query answers.
//
// For each: a few pods per profile are placed while waterline decides; the fault is
// injected and held until the scorer's fleet breaker opens for every metric the fault
// starves (waterline_stale_breaker_open = 1, and its warn line in the scorer's log) — and,
// for one-query-failing, stays closed for cpu; a burst per profile is created under the
// fault and every pod of it is placed (the breaker's neutral answer, or cpu alone); with
// cpu still fresh no pod reaches the hot node. Healed: the breaker closes (gauge 0 and its
// log line), and a burst per profile is placed with no pod on the hot node and no neutral
// answer (plugin fail-open or extender fallback). Afterwards the collector's ledger equals
// the bound pods, and no process panicked. How long each fault held, when the breaker
// opened and how long recovery took are logged and appended to results/long-faults.txt.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/waterline/waterline/plugin/waterline"
	"github.com/waterline/waterline/tests/e2e/stack"
)

const (
	lfHot           = faultHot
	lfPluginProfile = "waterline-plugin"
	lfMaxAge        = 8 * time.Second
	// lfBefore pods per profile are placed before each fault, lfBurst per profile under it
	// and lfAfter per profile after the heal.
	lfBefore = 2
	lfBurst  = 6
	lfAfter  = 3
	// lfBreakerWithin bounds how long after maxAge the breaker may take to open: the
	// scorer's gauges refresh every 2 s and the collector's last sample is up to a poll
	// period (1 s) old when the fault starts.
	lfBreakerWithin = 20 * time.Second
)

var lfProfiles = []string{stack.SchedulerName, lfPluginProfile}

type longFault struct {
	name string
	// starved: the metrics whose samples stop; the others must stay fresh.
	starved []string
	inject  func(f *longFaultStack)
	heal    func(f *longFaultStack)
	// seen: the collector saw the fault (a failed query), polled.
	seen func(f *longFaultStack) error
}

type longFaultStack struct {
	*stack.Stack
	promNet *stack.FaultProxy
	hot     string
	results []string
}

func TestLongFaults(t *testing.T) {
	stack.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The fault matrix's stack (faultStackOptions), its samples stale after lfMaxAge.
	opts := faultStackOptions()
	opts.Policy.Stale = fmt.Sprintf("{maxAge: %s, filter: pass, score: 50, breakerShare: 0.5, breakerMinNodes: 3}", lfMaxAge)
	s := stack.New(ctx, t, opts)
	f := &longFaultStack{Stack: s, hot: stack.NodeName(lfHot)}
	f.promNet = stack.StartProxy(t, strings.TrimPrefix(s.PrometheusURL, "http://"))
	s.Collector.SetFlag("--prometheus-url", "http://"+f.promNet.Addr())
	s.Collector.SetFlag("--prometheus-timeout", "2s")
	s.Collector.RestartReady(ctx, t)
	s.WaitMetrics(func(n string, m map[string]float64) bool {
		_, mem := m["mem_usage_avg_5m"]
		return mem && (n != f.hot || m["cpu_usage_avg_5m"] > 65)
	}, "metrics through the Prometheus proxy, the hot node above the filter")
	s.StartSchedulerConfig(dualProfileConfig(t, s.Scorer.Addr, s.Extender.ExtenderURL()))

	memFailing := strings.Replace(opts.Policy.YAML(), `query: "waterline:node_memory_usage:avg5m"`,
		// Six series on each side matched on no label: Prometheus refuses it at evaluation
		// ("multiple matches for labels"), after the collector's syntax check passed.
		`query: "waterline:node_memory_usage:avg5m + on() group_left() waterline:node_memory_usage:avg5m"`, 1)
	if memFailing == opts.Policy.YAML() {
		t.Fatal("the memory metric's query was not found in the generated policy")
	}
	faults := []longFault{
		{
			name:    "collector-cut-from-prometheus",
			starved: []string{"cpu_usage_avg_5m", "mem_usage_avg_5m"},
			inject:  func(f *longFaultStack) { f.promNet.BlackHole() },
			heal:    func(f *longFaultStack) { f.promNet.Pass() },
			seen:    queryFailed("cpu_usage_avg_5m"),
		},
		{
			name:    "prometheus-killed",
			starved: []string{"cpu_usage_avg_5m", "mem_usage_avg_5m"},
			inject:  func(f *longFaultStack) { f.Prometheus.Kill() },
			heal: func(f *longFaultStack) {
				f.Prometheus.Restart(f.T())
				if err := stack.WaitPrometheusReady(f.Ctx(), f.Prometheus, f.PrometheusURL); err != nil {
					f.T().Fatal(err)
				}
			},
			seen: queryFailed("cpu_usage_avg_5m"),
		},
		{
			name:    "one-query-failing",
			starved: []string{"mem_usage_avg_5m"},
			inject: func(f *longFaultStack) {
				if err := os.WriteFile(f.PolicyPath, []byte(memFailing), 0o644); err != nil {
					f.T().Fatal(err)
				}
			},
			heal: func(f *longFaultStack) { f.WritePolicy(f.Opts.Policy) },
			seen: queryFailed("mem_usage_avg_5m"),
		},
	}
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) { f.run(t, fc) })
	}
	stack.AppendResult(t, "long-faults.txt", fmt.Sprintf("%s\n%s", time.Now().UTC().Format(time.RFC3339), strings.Join(f.results, "")))
	stack.CheckNoPanic(t, s.Procs()...)
}

// dualProfileConfig writes a scheduler configuration with two profiles, in-tree scoring
// off in both (waterline ranks alone): waterline-scheduler through the extender at
// extenderURL and waterline-plugin through the plugin at scorerAddr.
func dualProfileConfig(t *testing.T, scorerAddr, extenderURL string) string {
	config := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
  - schedulerName: %[1]s
    plugins: {score: {disabled: [{name: '*'}]}}
  - schedulerName: %[2]s
    plugins:
      multiPoint: {enabled: [{name: %[3]s, weight: 5}]}
      score: {disabled: [{name: '*'}], enabled: [{name: %[3]s, weight: 5}]}
    pluginConfig:
      - name: %[3]s
        args: {endpoint: %[4]q, timeout: 1s, failOpen: true}
`, stack.SchedulerName, lfPluginProfile, waterline.Name, scorerAddr) + stack.ExtenderYAML(extenderURL, "")
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func queryFailed(metric string) func(f *longFaultStack) error {
	var before float64 = -1
	return func(f *longFaultStack) error {
		v, err := stack.AdminSum(f.Collector.Admin, "waterline_promql_failures_total", "metric", metric)
		if err != nil {
			return err
		}
		if before < 0 {
			before = v
			return fmt.Errorf("first read")
		}
		if v <= before {
			return fmt.Errorf("no failed %s query yet", metric)
		}
		return nil
	}
}

// neutral counts both paths' neutral answers: the plugin's fail-opens and the extender's
// fallbacks.
func (f *longFaultStack) neutral() float64 {
	fallbacks, err := stack.AdminSum(f.Extender.Admin, "waterline_extender_fallbacks_total")
	if err != nil {
		f.T().Fatalf("extender metrics: %v", err)
	}
	return stack.PluginFailOpens() + fallbacks
}

func (f *longFaultStack) breaker(metric string) float64 {
	v, err := stack.AdminSum(f.Scorer.Admin, "waterline_stale_breaker_open", "metric", metric)
	if err != nil {
		f.T().Fatalf("scorer metrics: %v", err)
	}
	return v
}

// place creates n pods per profile at once and waits for every one; it returns pods per node.
func (f *longFaultStack) place(ns, prefix string, n int) map[string]int {
	f.T().Helper()
	var pods []*v1.Pod
	var names []string
	for _, profile := range lfProfiles {
		for i := 0; i < n; i++ {
			p := stack.NewPod(ns, fmt.Sprintf("%s-%s-%d", prefix, profile, i))
			p.Spec.SchedulerName = profile
			pods = append(pods, p)
			names = append(names, p.Name)
		}
	}
	f.CreatePods(pods, len(pods))
	return f.CountPerNode(f.WaitScheduled(ns, names, 90*time.Second))
}

func (f *longFaultStack) waitBreakers(what string, want float64, metrics []string) {
	f.T().Helper()
	err := stack.WaitFor(f.Ctx(), lfMaxAge+lfBreakerWithin, 200*time.Millisecond, what, func() (bool, error) {
		for _, m := range metrics {
			if f.breaker(m) != want {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		f.T().Fatal(err)
	}
}

func (f *longFaultStack) run(t *testing.T, fc longFault) {
	s := f.Stack.ForTest(t)
	g := *f
	g.Stack = s
	ns := "long-" + fc.name
	s.EnsureNamespace(ns)
	fresh := []string{}
	for _, m := range []string{"cpu_usage_avg_5m", "mem_usage_avg_5m"} {
		if !contains(fc.starved, m) {
			fresh = append(fresh, m)
		}
	}

	before := g.place(ns, "before", lfBefore)
	if before[g.hot] > 0 {
		t.Fatalf("before the fault %d pods reached the hot node: %s", before[g.hot], stack.FmtCounts(before))
	}
	logOpen0 := strings.Count(s.Scorer.Tail(1<<20), "stale breaker open")
	logClosed0 := strings.Count(s.Scorer.Tail(1<<20), "stale breaker closed")

	injected := time.Now()
	fc.inject(&g)
	if err := stack.WaitFor(s.Ctx(), 30*time.Second, 200*time.Millisecond, fc.name+" seen by the collector", func() (bool, error) {
		return fc.seen(&g) == nil, nil
	}); err != nil {
		fc.heal(&g)
		t.Fatal(err)
	}
	g.waitBreakers("the breaker opens for "+strings.Join(fc.starved, ", "), 1, fc.starved)
	opened := time.Since(injected)
	for _, m := range fresh {
		if g.breaker(m) != 0 {
			t.Errorf("%s: the breaker opened for %s, whose query still answers", fc.name, m)
		}
	}
	if n := strings.Count(s.Scorer.Tail(1<<20), "stale breaker open"); n <= logOpen0 {
		t.Errorf("%s: no 'stale breaker open' line in the scorer's log", fc.name)
	}

	neutral0 := g.neutral()
	under := g.place(ns, "under", lfBurst)
	if len(fresh) > 0 && under[g.hot] > 0 {
		t.Errorf("%s: %d pods reached the hot node though %v stayed fresh", fc.name, under[g.hot], fresh)
	}
	if n := g.neutral() - neutral0; n > 0 {
		t.Errorf("%s: %.0f neutral answers from the scheduler side: the scorer was reachable throughout and should have answered", fc.name, n)
	}
	held := time.Since(injected)

	healed := time.Now()
	fc.heal(&g)
	g.waitBreakers("the breaker closes", 0, fc.starved)
	recovered := time.Since(healed)
	if n := strings.Count(s.Scorer.Tail(1<<20), "stale breaker closed"); n <= logClosed0 {
		t.Errorf("%s: no 'stale breaker closed' line in the scorer's log", fc.name)
	}
	neutral1 := g.neutral()
	after := g.place(ns, "after", lfAfter)
	if after[g.hot] > 0 || g.neutral() != neutral1 {
		t.Errorf("%s: after the heal %d pods on the hot node, %.0f neutral answers: %s", fc.name, after[g.hot], g.neutral()-neutral1, stack.FmtCounts(after))
	}
	lc := s.CheckLedger(ns)
	line := fmt.Sprintf("%s: held %v (breaker open %v after the injection, maxAge %v); under it %d pods placed on both paths (%d on the hot node); recovered %v after the heal; ledger = %d bound pods\n",
		fc.name, held.Round(100*time.Millisecond), opened.Round(100*time.Millisecond), lfMaxAge, 2*lfBurst, under[g.hot], recovered.Round(100*time.Millisecond), lc.Pods)
	t.Log(line)
	f.results = append(f.results, line)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
