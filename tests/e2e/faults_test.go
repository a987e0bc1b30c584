package e2e

// Faults injected while a burst of pods is being scheduled, on the real control plane:
//
//   - TestFaultMatrix (RELIABILITY.md): one shared stack per path, one subtest per fault,
//     each in its own namespace: Prometheus killed, slow, answering garbage; the API
//     server's watch cut; collector SIGKILL and restart; scorer SIGKILL and restart; the
//     scheduler-scorer network black-holed; the policy file replaced by an invalid one.
//   - TestCollectorKillMidBurst (docs/operations.md): two collectors, the one the scorer streams
//     from SIGKILLed mid-burst.
//
// Every fault asserts the same things: every pod of the burst is placed (the stack leaves
// room for every pod, so a pending one is a failure, reported with its PodScheduled reason);
// the collector's ledger equals the pods afterwards (stack.LedgerMismatches); the fault was
// observed where it should be (a counter, a reconnect); after the fault is healed waterline
// decides again (probe pods, then a batch with no neutral answer and none on the hot node);
// and no waterline process panicked. A fault that leaves waterline deciding (the scorer
// still answers from its snapshot) also asserts that no pod of the burst went to the hot
// node, which only a neutral answer could choose.
//
// The stack (faultStackOptions): 6 nodes, node-5 at 90 % cpu (rejected by the 65 % filter),
// the others at 10-22 %, ledger on. Its collector reaches Prometheus and the API server
// through fault proxies (stack.FaultProxy), and the scheduler reaches the scorer through one
// (the plugin's endpoint; on the extender path the extender's --scorer-url). The collector
// runs with --prometheus-timeout 2s (the slow-Prometheus proxy adds 10 s, and the default
// 10 s timeout would race it) and --kube-watch-timeout 5s (a stranded watch is noticed after
// 10 s of silence instead of the default's 65 s).

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/tests/e2e/stack"
)

const (
	faultNodes = 6
	faultHot   = 5
	// faultBurst pods are created one every faultGap; the fault is injected once
	// faultBeforeInject are bound and held until faultUnderFault more are.
	faultBurst        = 16
	faultGap          = 200 * time.Millisecond
	faultBeforeInject = 4
	faultUnderFault   = 4
	// faultAfterHeal pods are created at once after the fault is healed.
	faultAfterHeal    = 4
	faultPromTimeout  = "2s"
	faultWatchTimeout = "5s"
	faultPromDelay    = 10 * time.Second
	nodeCPUMillis     = 8000
	nodeMemoryBytes   = 32 << 30
	faultEffectWindow = 90 * time.Second
)

func faultStackOptions() stack.Options {
	return stack.Options{
		Nodes: faultNodes,
		CPUBusy: func(i int) float64 {
			if i == faultHot {
				return 0.9
			}
			return 0.10 + 0.03*float64(i)
		},
		MemoryUsed:  0.2,
		Policy:      stack.Policy{Metrics: []stack.Metric{stack.CPUAvg5m.WithFilter(65), stack.MemAvg5m.WithFilter(65)}, Ledger: true},
		WaitMetrics: true,
	}
}

// ---------------------------------------------------------------- the shared stack

type faultStack struct {
	*stack.Stack
	path stack.Path
	// promNet is in front of Prometheus (the collector's --prometheus-url), apiNet in front of the
	// API server (the collector's kubeconfig), scorerNet in front of the scorer's gRPC port
	// (the plugin's endpoint, or the extender's --scorer-url).
	promNet, apiNet, scorerNet *stack.FaultProxy
	hot                        string
	namespaces                 []string
}

// newFaultStack starts the stack of one path, rewires the collector and the scheduler's
// way to the scorer through fault proxies, and starts the scheduler.
func newFaultStack(ctx context.Context, t *testing.T, path stack.Path) *faultStack {
	t.Helper()
	s := stack.New(ctx, t, faultStackOptions())
	fs := &faultStack{Stack: s, path: path, hot: stack.NodeName(faultHot)}
	fs.promNet = stack.StartProxy(t, strings.TrimPrefix(s.PrometheusURL, "http://"))
	fs.apiNet = stack.StartProxy(t, strings.TrimPrefix(s.Cluster.Server, "https://"))
	s.Collector.SetFlag("--prometheus-url", "http://"+fs.promNet.Addr())
	s.Collector.SetFlag("--prometheus-timeout", faultPromTimeout)
	// A silently lost watch is taken for dead after this + 5 s (the default is a minute).
	s.Collector.SetFlag("--kube-watch-timeout", faultWatchTimeout)
	s.Collector.SetFlag("--kubeconfig", stack.KubeconfigVia(t, s.Cluster.KubeconfigPath, "https://"+fs.apiNet.Addr()))
	s.Collector.RestartReady(ctx, t)

	fs.scorerNet = stack.StartProxy(t, s.Scorer.Addr)
	spec := s.WaterlineScheduler(path)
	if path == stack.PluginPath {
		spec.Plugin.Endpoint = fs.scorerNet.Addr()
	} else {
		s.Extender.SetFlag("--scorer-url", "http://"+fs.scorerNet.Addr())
		s.Extender.RestartReady(ctx, t)
	}
	s.WaitMetrics(func(n string, m map[string]float64) bool {
		_, mem := m["mem_usage_avg_5m"]
		return mem && (n != fs.hot || m["cpu_usage_avg_5m"] > 65)
	}, "metrics through the Prometheus proxy, the hot node above the filter")
	s.StartScheduler(spec)
	return fs
}

// forTest is fs with t as the test its helpers fail (a subtest of the one that built it).
func (fs *faultStack) forTest(t *testing.T) *faultStack {
	c := *fs
	c.Stack = fs.Stack.ForTest(t)
	return &c
}

// neutralAnswers counts the scheduler side's neutral answers: the plugin's fail-opens, or
// the extender's fallbacks.
func (fs *faultStack) neutralAnswers() float64 {
	if fs.path == stack.PluginPath {
		return stack.PluginFailOpens()
	}
	v, err := stack.AdminSum(fs.Extender.Admin, "waterline_extender_fallbacks_total")
	if err != nil {
		fs.T().Fatalf("extender metrics: %v", err)
	}
	return v
}

// waitDecidingAgain, after a fault was healed: schedules probe pods (label probe=true,
// tiny request) one at a time until one is placed without a neutral answer (the plugin's
// and the extender's gRPC clients reconnect with backoff).
func (fs *faultStack) waitDecidingAgain(ns string) {
	fs.T().Helper()
	t0 := time.Now()
	for i := 0; ; i++ {
		if time.Since(t0) > 90*time.Second {
			fs.T().Fatalf("%s path still answers neutrally %v after the fault was healed", fs.path, time.Since(t0).Round(time.Second))
		}
		before := fs.neutralAnswers()
		name := fmt.Sprintf("probe-%d", i)
		fs.CreatePods([]*v1.Pod{stack.NewPod(ns, name, stack.WithLabels("probe", "true"), stack.WithCPU("10m", ""))}, 1)
		fs.WaitScheduled(ns, []string{name}, time.Minute)
		if fs.neutralAnswers() == before {
			if i > 0 {
				fs.T().Logf("deciding again %v after the heal (%d probe pods)", time.Since(t0).Round(time.Millisecond), i+1)
			}
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- the matrix

// faultCase is one row of the matrix.
type faultCase struct {
	name string
	// paths the fault runs on (nil: both); why says why a fault runs on one path only.
	paths []stack.Path
	why   string
	// deciding: the scorer answers throughout (from its snapshot), so no pod may reach the
	// hot node and no neutral answer may be given.
	deciding bool
	inject   func(f *faultStack)
	// effect returns nil once the fault shows where it should (polled; seen once is enough).
	effect func(f *faultStack) error
	heal   func(f *faultStack)
}

var (
	promGarbageBody = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":` + "\x00\xff\xfe <html>garbage"
	promGarbage     = []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(promGarbageBody), promGarbageBody))
	// invalidPolicy drops the filters, which a lenient reload would apply (pods could then
	// reach the hot node), and has a water level outside 0..100, which makes it invalid.
	invalidPolicy = `metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: "waterline:node_cpu_usage:avg5m", period: 1s, weight: 0.5}
  - {name: mem_usage_avg_5m, resource: memory, query: "waterline:node_memory_usage:avg5m", period: 1s, weight: 0.5}
curve: {kind: waterLevel, target: 140}
ledger: {enabled: true}
`
)

// counterAbove returns an effect: metric on admin (labels as stack.AdminSum) has risen above
// its value when the effect was built.
func counterAbove(admin, metric string, labels ...string) func() error {
	before, _ := stack.AdminSum(admin, metric, labels...)
	return func() error {
		v, err := stack.AdminSum(admin, metric, labels...)
		if err != nil {
			return err
		}
		if v <= before {
			return fmt.Errorf("%s still %g", metric, v)
		}
		return nil
	}
}

// promFault: a Prometheus fault is seen when the cpu metric's query fails; healed when both
// metrics' last queries succeed again.
func promFault(name string, inject, heal func(f *faultStack)) faultCase {
	var seen func() error
	return faultCase{
		name:     name,
		paths:    []stack.Path{stack.PluginPath},
		why:      "Prometheus is behind the collector: the scheduler's path only sees the snapshot, whose samples age the same way on both paths",
		deciding: true,
		inject: func(f *faultStack) {
			seen = counterAbove(f.Collector.Admin, "waterline_promql_failures_total", "metric", "cpu_usage_avg_5m")
			inject(f)
		},
		effect: func(*faultStack) error { return seen() },
		heal: func(f *faultStack) {
			heal(f)
			// Both metrics polled again.
			f.WaitAdminMetric("waterline_metric_last_poll_failed", 0, f.Collector.Admin)
		},
	}
}

var faultCases = []faultCase{
	{
		name:     "policy-invalid",
		paths:    []stack.Path{stack.ExtenderPath},
		why:      "the collector, the scorer and the extender each reload the file on their own; on the extender path all three are in the scheduling path",
		deciding: true,
		inject: func(f *faultStack) {
			if err := os.WriteFile(f.PolicyPath, []byte(invalidPolicy), 0o644); err != nil {
				f.T().Fatal(err)
			}
		},
		effect: func(f *faultStack) error {
			for _, p := range []struct{ name, admin string }{{"collector", f.Collector.Admin}, {"scorer", f.Scorer.Admin}, {"extender", f.Extender.Admin}} {
				errs, err := stack.AdminSum(p.admin, "waterline_policy_reload_errors_total")
				if err != nil {
					return err
				}
				valid, err := stack.AdminSum(p.admin, "waterline_policy_file_valid")
				if err != nil {
					return err
				}
				if errs < 1 || valid != 0 {
					return fmt.Errorf("%s: reload errors %g, file valid %g", p.name, errs, valid)
				}
			}
			return nil
		},
		heal: func(f *faultStack) {
			f.WritePolicy(f.Opts.Policy)
			f.WaitAdminMetric("waterline_policy_file_valid", 1, f.Collector.Admin, f.Scorer.Admin, f.Extender.Admin)
		},
	},
	promFault("prometheus-killed",
		func(f *faultStack) { f.Prometheus.Kill() },
		func(f *faultStack) {
			f.Prometheus.Restart(f.T())
			if err := stack.WaitPrometheusReady(f.Ctx(), f.Prometheus, f.PrometheusURL); err != nil {
				f.T().Fatal(err)
			}
		}),
	promFault("prometheus-slow",
		func(f *faultStack) { f.promNet.Delay(faultPromDelay) },
		func(f *faultStack) { f.promNet.Pass() }),
	promFault("prometheus-garbage",
		func(f *faultStack) { f.promNet.Garbage(promGarbage) },
		func(f *faultStack) { f.promNet.Pass() }),
	// Both paths: on the extender path the pod watch is the ledger's only confirmed source;
	// on the plugin path Reserves arrive through the scorer as well.
	watchFault("apiserver-watch-cut", nil, "", "cut", (*stack.FaultProxy).CutAll),
	watchFault("apiserver-watch-stranded", []stack.Path{stack.ExtenderPath},
		"the watch is the extender path's only confirmed ledger source (provisional guesses expire); "+
			"on the plugin path Reserves fill the ledger meanwhile, and the watch's recovery is the same code",
		"strand", (*stack.FaultProxy).StrandAll),
	func() faultCase {
		return faultCase{
			name:     "collector-kill-restart",
			deciding: true,
			inject:   func(f *faultStack) { f.Collector.Kill() },
			effect: func(f *faultStack) error {
				if v, err := stack.AdminSum(f.Scorer.Admin, "waterline_collector_connected"); err != nil || v != 0 {
					return fmt.Errorf("scorer still streaming (%g, %v)", v, err)
				}
				return nil
			},
			heal: func(f *faultStack) {
				f.Collector.RestartReady(f.Ctx(), f.T())
				f.WaitAdminMetric("waterline_collector_connected", 1, f.Scorer.Admin)
			},
		}
	}(),
	neutralFault("scorer-kill-restart",
		func(f *faultStack) { f.Scorer.Kill() },
		func(f *faultStack) { f.Scorer.RestartReady(f.Ctx(), f.T()) }),
	neutralFault("scheduler-scorer-black-hole",
		func(f *faultStack) { f.scorerNet.BlackHole() },
		func(f *faultStack) { f.scorerNet.Pass() }),
}

// watchFault: a fault done to the collector's connections to the API server (cut or
// strand them), seen once the collector opened a new one.
func watchFault(name string, paths []stack.Path, why, verb string, do func(*stack.FaultProxy) int) faultCase {
	var accepted int64
	return faultCase{
		name: name, paths: paths, why: why,
		deciding: true,
		inject: func(f *faultStack) {
			accepted = f.apiNet.Accepted()
			if n := do(f.apiNet); n == 0 {
				f.T().Fatalf("no collector connection to the API server to %s", verb)
			}
		},
		effect: func(f *faultStack) error {
			if f.apiNet.Accepted() <= accepted {
				return fmt.Errorf("the collector has not reconnected to the API server")
			}
			return nil
		},
		heal: func(*faultStack) {},
	}
}

// neutralFault: a fault that takes the scorer away from the scheduler, seen once the
// scheduler side answered neutrally (plugin fail-open, extender fallback) for a pod of the
// burst: that pod was placed within the RPC timeout instead of waiting for the scorer.
func neutralFault(name string, inject, heal func(f *faultStack)) faultCase {
	var before float64
	return faultCase{
		name: name,
		inject: func(f *faultStack) {
			before = f.neutralAnswers()
			inject(f)
		},
		effect: func(f *faultStack) error {
			if n := f.neutralAnswers(); n <= before {
				return fmt.Errorf("no neutral answer yet (%g)", n)
			}
			return nil
		},
		heal: heal,
	}
}

func (fc faultCase) runsOn(path stack.Path) bool {
	if fc.paths == nil {
		return true
	}
	for _, p := range fc.paths {
		if p == path {
			return true
		}
	}
	return false
}

// run injects fc while a burst is being scheduled, heals it, and checks the outcome.
func (fs *faultStack) run(t *testing.T, fc faultCase) {
	f := fs.forTest(t)
	t0 := time.Now()
	ns := "fault-" + fc.name
	f.EnsureNamespace(ns)
	fs.namespaces = append(fs.namespaces, ns)
	neutral0 := f.neutralAnswers()

	names, created := f.PacedPods(ns, "burst", faultBurst, faultGap)
	f.WaitScheduled(ns, names[:faultBeforeInject], time.Minute)
	atInject, err := f.BoundCount(ns)
	if err != nil {
		t.Fatal(err)
	}
	fc.inject(f)
	injected := time.Now()
	// Hold the fault until it shows and faultUnderFault more pods were bound under it.
	seen := false
	var boundUnder int
	err = stack.WaitFor(f.Ctx(), faultEffectWindow, 100*time.Millisecond, fc.name+" seen and pods bound under it", func() (bool, error) {
		n, err := f.BoundCount(ns)
		if err != nil {
			return false, err
		}
		boundUnder = n - atInject
		if !seen {
			if err := fc.effect(f); err != nil {
				return false, err
			}
			seen = true
			t.Logf("%s: seen %v after the injection", fc.name, time.Since(injected).Round(time.Millisecond))
		}
		return boundUnder >= faultUnderFault, nil
	})
	if err != nil {
		fc.heal(f)
		t.Fatalf("%v (%d pods bound under the fault)", err, boundUnder)
	}
	fc.heal(f)
	t.Logf("%s: on for %v; %d pods bound under it; healed", fc.name, time.Since(injected).Round(time.Millisecond), boundUnder)
	if err := <-created; err != nil {
		t.Fatal(err)
	}

	placed := f.WaitScheduled(ns, names, 2*time.Minute)
	counts := f.CountPerNode(placed)
	neutral := f.neutralAnswers() - neutral0
	t.Logf("%s: burst of %d placed: %s; neutral answers during it: %.0f", fc.name, len(names), stack.FmtCounts(counts), neutral)
	if fc.deciding {
		if counts[f.hot] > 0 {
			t.Errorf("%s: %d pods of the burst on the hot node %s, though the scorer kept answering", fc.name, counts[f.hot], f.hot)
		}
		if neutral > 0 {
			t.Errorf("%s: %.0f neutral answers, though the scorer kept answering", fc.name, neutral)
		}
	}

	// Healed: waterline decides again.
	f.waitDecidingAgain(ns)
	neutral1 := f.neutralAnswers()
	after := stack.PodNames("after", faultAfterHeal)
	var pods []*v1.Pod
	for _, n := range after {
		pods = append(pods, stack.NewPod(ns, n))
	}
	f.CreatePods(pods, len(pods))
	afterCounts := f.CountPerNode(f.WaitScheduled(ns, after, time.Minute))
	if afterCounts[f.hot] > 0 || f.neutralAnswers() != neutral1 {
		t.Errorf("%s: after the heal %d pods on the hot node, %.0f neutral answers: %s", fc.name, afterCounts[f.hot], f.neutralAnswers()-neutral1, stack.FmtCounts(afterCounts))
	}

	lc := f.CheckLedger(ns)
	t.Logf("%s: ledger equals the %d bound pods (%d entries at their PodScheduled second, %d at a Reserve or provisional time before it); %v in all",
		fc.name, lc.Pods, lc.AtScheduled, lc.Pods-lc.AtScheduled, time.Since(t0).Round(time.Millisecond))
	stack.CheckNoPanic(t, f.Procs()...)
}

// TestFaultMatrix: one shared stack per path (see the file comment).
func TestFaultMatrix(t *testing.T) { stack.EachPath(t, testFaultMatrix) }

func testFaultMatrix(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	fs := newFaultStack(ctx, t, path)
	t.Logf("fault stack up in %v", time.Since(t0).Round(time.Millisecond))
	for _, fc := range faultCases {
		if !fc.runsOn(path) {
			continue
		}
		if !t.Run(fc.name, func(t *testing.T) { fs.run(t, fc) }) {
			// A fault that was not healed would spoil the next ones.
			t.Fatalf("%s failed; the remaining faults are not run on this stack", fc.name)
		}
	}
	// A later fault (a collector restart, a watch relist) must not have lost an earlier
	// fault's placements.
	stack.KeepLogs(t, "faults-"+string(path), fs.Procs()...)
	lc := fs.forTest(t).CheckLedger(fs.namespaces...)
	t.Logf("%s path: ledger equals all %d bound pods of %d faults at the end; matrix %v", path, lc.Pods, len(fs.namespaces), time.Since(t0).Round(time.Second))
}

// ---------------------------------------------------------------- two collectors

// streamingFrom is the collector URL of the scorer's last "streaming from the collector" log
// line after offset (bytes of its log), "" when there is none.
func streamingFrom(scorer *stack.Proc, offset int, urls ...string) string {
	b, _ := os.ReadFile(scorer.LogPath)
	if offset > len(b) {
		return ""
	}
	from := ""
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		i := strings.Index(line, "collector=")
		if !strings.Contains(line, "streaming from the collector") || i < 0 {
			continue
		}
		if f := strings.Fields(line[i+len("collector="):]); len(f) > 0 {
			for _, u := range urls {
				if f[0] == u {
					from = u
				}
			}
		}
	}
	return from
}

// expectedLedgerPercent is, per node, the ledger share the scorer should add for the
// entries of l (ListNodes): per policy metric, cpu_millis / 8 cores or memory_bytes / 32 GiB
// of every entry still counting toward it, in percent, summed over the metrics
// (stack.ScorerLedgerPercent's sum).
func expectedLedgerPercent(l map[string]*wlv1.LedgerEntry) map[string]float64 {
	out := map[string]float64{}
	for _, e := range l {
		for metric, left := range e.GetAbsorbRemainingByMetric() {
			if left.AsDuration() <= 0 {
				continue
			}
			switch metric {
			case stack.CPUAvg5m.Name:
				out[e.GetNodeName()] += 100 * float64(e.GetCpuMillis()) / nodeCPUMillis
			case stack.MemAvg5m.Name:
				out[e.GetNodeName()] += 100 * float64(e.GetMemoryBytes()) / nodeMemoryBytes
			}
		}
	}
	return out
}

// TestCollectorKillMidBurst: two collectors with the same flags (each
// polls Prometheus and watches the API server on its own); the scorer gets both
// (--collector-url a,b), streams from one and forwards every Reserve to both. 20 pods are
// created one every 150 ms; once 5 are bound the collector the scorer streams from is
// SIGKILLed (and stays dead). Every pod is placed, none on the hot node (the scorer keeps
// deciding: it serves its snapshot and fails over); the surviving collector's ledger
// (ListNodes) equals the pods; the scorer streams from the survivor, and the ledger share it
// adds per node equals that of the survivor's entries.
func TestCollectorKillMidBurst(t *testing.T) { stack.EachPath(t, testCollectorKillMidBurst) }

func testCollectorKillMidBurst(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	t0 := time.Now()
	s := stack.New(ctx, t, faultStackOptions())
	hot := stack.NodeName(faultHot)

	bGRPC, bAdmin := stack.FreeAddr(t), stack.FreeAddr(t)
	args := s.Collector.Args()
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--grpc-addr":
			args[i+1] = bGRPC
		case "--admin-addr":
			args[i+1] = bAdmin
		}
	}
	b := stack.Service{Proc: stack.StartProc(t, "collector-b", s.Collector.Path, args...), Addr: bGRPC, Admin: bAdmin}
	b.WaitReady(ctx, t)
	aURL, bURL := "http://"+s.Collector.Addr, "http://"+bGRPC
	offset := s.Scorer.LogSize()
	s.Scorer.SetFlag("--collector-url", aURL+","+bURL)
	s.Scorer.RestartReady(ctx, t)
	var from string
	if err := stack.WaitFor(ctx, 30*time.Second, 100*time.Millisecond, "the scorer streaming", func() (bool, error) {
		from = streamingFrom(s.Scorer.Proc, offset, aURL, bURL)
		return from != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	victim, survivor := s.Collector, b
	if from == bURL {
		victim, survivor = b, s.Collector
	}
	s.StartScheduler(s.WaterlineScheduler(path))
	t.Logf("two collectors, the scorer streams from %s (%v since start)", from, time.Since(t0).Round(time.Millisecond))

	ns := "ha"
	s.EnsureNamespace(ns)
	names, created := s.PacedPods(ns, "burst", 20, 150*time.Millisecond)
	s.WaitScheduled(ns, names[:5], time.Minute)
	offset = s.Scorer.LogSize()
	victim.Kill()
	killed := time.Now()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	counts := s.CountPerNode(s.WaitScheduled(ns, names, 2*time.Minute))
	n, _ := s.BoundCount(ns)
	t.Logf("%s killed with 5 of 20 bound; all 20 placed %v later: %s", victim.Name, time.Since(killed).Round(time.Millisecond), stack.FmtCounts(counts))
	if counts[hot] > 0 {
		t.Errorf("%d pods on the hot node %s: the scorer should have kept deciding", counts[hot], hot)
	}
	if n != len(names) {
		t.Errorf("%d pods bound, want %d", n, len(names))
	}

	// The ledger the scorers see: the survivor's, over gRPC.
	sv := s.WithCollector(survivor.Addr)
	lc := sv.CheckLedger(ns)
	t.Logf("the surviving collector's ledger equals the %d bound pods (%d at their PodScheduled second)", lc.Pods, lc.AtScheduled)

	// The scorer streams from the survivor and adds the same ledger share per node.
	var got, want map[string]float64
	err := stack.WaitFor(ctx, 30*time.Second, 200*time.Millisecond, "the scorer streaming from the survivor with its ledger", func() (bool, error) {
		if streamingFrom(s.Scorer.Proc, offset, aURL, bURL) != "http://"+survivor.Addr {
			return false, fmt.Errorf("no failover to %s in the scorer's log yet", survivor.Addr)
		}
		l, err := sv.Ledger()
		if err != nil {
			return false, err
		}
		want = expectedLedgerPercent(l)
		got, err = s.ScorerLedgerPercent()
		if err != nil {
			return false, err
		}
		for _, node := range s.Nodes {
			if math.Abs(got[node]-want[node]) > 1e-6 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("%v: scorer's ledger share %v, the survivor's entries give %v", err, got, want)
	}
	reconnects, _ := stack.AdminSum(s.Scorer.Admin, "waterline_collector_reconnects_total")
	t.Logf("the scorer failed over to %s (reconnects %g); ledger share per node %v; %v in all", survivor.Name, reconnects, got, time.Since(t0).Round(time.Millisecond))
	procs := append(s.Procs(), b.Proc)
	stack.KeepLogs(t, "collector-kill-"+string(path), procs...)
	stack.CheckNoPanic(t, procs...)
}
