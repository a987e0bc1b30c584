package e2e

// Scenario tests: a real control plane (harness/), a real Prometheus scraping
// the fake exporter, the real waterline binaries, and a real kube-scheduler
// whose profile `waterline-scheduler` reaches waterline one of two ways:
// through waterline-extender (HTTP extender) or through the Waterline
// framework plugin (plugin/waterline, gRPC straight to the scorer). Every
// scenario runs once per path, as subtests `extender` and `plugin`, one after
// the other (one control plane per process at a time). See README.md.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/tests/e2e/stack"
)

// TestHotNodeAvoided: 10 nodes. First every node is hot (90 % cpu): a pod
// stays Pending and its FailedScheduling event and PodScheduled condition
// name the metric. Then all nodes but node-3 cool down to 10-28 %: 10 pods
// schedule and none lands on node-3.
//
// On the plugin path the message comes from the plugin's PreFilter ("waterline
// rejected all 10 node(s); node-0: cpu_usage_avg_5m ...").
func TestHotNodeAvoided(t *testing.T) { stack.EachPath(t, testHotNodeAvoided) }

func testHotNodeAvoided(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const hot = 3
	s := stack.New(ctx, t, stack.Options{
		Nodes:      10,
		CPUBusy:    func(i int) float64 { return 0.9 },
		MemoryUsed: 0.2,
		Policy: stack.Policy{
			Metrics: []stack.Metric{stack.CPUAvg5m.WithFilter(65), stack.MemAvg5m.WithFilter(65)},
			Ledger:  true,
		},
		WaitMetrics: true,
	})
	s.WaitMetrics(func(_ string, m map[string]float64) bool { return m["cpu_usage_avg_5m"] > 80 }, "every node above 80 % cpu")
	s.StartScheduler(s.WaterlineScheduler(path))

	// --- every node hot: Pending, the reason names the metric
	ns := "default"
	s.CreatePods([]*v1.Pod{stack.NewPod(ns, "all-hot")}, 1)
	msg := s.WaitFailedScheduling(ns, "all-hot", "cpu_usage_avg_5m", 60*time.Second)
	t.Logf("all hot (%s path): FailedScheduling: %s", path, msg)
	// kube-scheduler passes the message to Eventf as the *format*, so a '%'
	// in an extender's FailedNodes reason or a plugin's status message comes
	// out as "%!(MISSING)" in `kubectl describe pod`. The reasons must not
	// contain '%'.
	if strings.Contains(msg, "%!") {
		t.Errorf("the FailedScheduling event text is mangled (%q): the %s path's reason contains '%%', which kube-scheduler's Eventf treats as a format verb; write e.g. \"above 65 percent\"", msg, path)
	}
	if path == stack.PluginPath && !strings.Contains(msg, "waterline rejected all") {
		t.Errorf("plugin path: the FailedScheduling event does not carry the plugin's PreFilter summary (\"waterline rejected all N node(s); ...\"): %q", msg)
	}
	p, err := s.Cluster.Client.CoreV1().Pods(ns).Get(ctx, "all-hot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("all-hot was bound to %s although every node is above the threshold", p.Spec.NodeName)
	}
	condOK := false
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, "cpu_usage_avg_5m") {
			condOK = true
			t.Logf("all hot: PodScheduled=False %s: %s", c.Reason, c.Message)
		}
	}
	if !condOK {
		t.Errorf("PodScheduled condition does not name the metric: %s", s.PodConditions(ns, "all-hot"))
	}
	gp := int64(0)
	if err := s.Cluster.Client.CoreV1().Pods(ns).Delete(ctx, "all-hot", metav1.DeleteOptions{GracePeriodSeconds: &gp}); err != nil {
		t.Fatal(err)
	}

	// --- one hot node among cool ones
	for i := 0; i < 10; i++ {
		if i != hot {
			s.Exporter.SetCPUBusy(stack.NodeName(i), 0.10+0.02*float64(i))
		}
	}
	hotName := stack.NodeName(hot)
	s.WaitMetrics(func(n string, m map[string]float64) bool {
		v, ok := m["cpu_usage_avg_5m"]
		if n == hotName {
			return ok && v > 80
		}
		return ok && v < 50
	}, "all nodes but node-3 below 50 % cpu")
	names := stack.PodNames("cool", 10)
	var pods []*v1.Pod
	for _, n := range names {
		pods = append(pods, stack.NewPod(ns, n))
	}
	s.CreatePods(pods, 10)
	placed := s.WaitScheduled(ns, names, 90*time.Second)
	counts := s.CountPerNode(placed)
	t.Logf("one hot node: placements %s", stack.FmtCounts(counts))
	if counts[hotName] != 0 {
		t.Errorf("%d pods landed on the hot node %s (90 %% cpu, threshold 65 %%)", counts[hotName], hotName)
	}
}

// TestBurstLedger: 8 nodes at 50, 51.5, ... 60.5 % cpu (above the water-level
// target 40, so a lower level scores higher; 1.5-point steps give every node
// a distinct integer score). 40 pods (cpu request 100m, limit 500m: estimate
// 425m = 5.3 % of an 8-core node each) are created at once.
//
// With the ledger (fed by the collector's pod watch with PodScheduled
// times) every placement raises its node's predicted level by 5.3 points, so
// the pods water-fill the nodes: the ideal final spread is 6,6,5,5,5,5,4,4
// (max-min 2). The scheduler places pods faster than a placement travels
// API server -> pod watch -> collector -> WatchNodes -> scorer, so a few
// pods are decided on a stale ledger; the bound allows that (max-min <= 5
// and no node above 10, a quarter of the burst).
//
// With `ledger: {enabled: false}` nothing changes between two pods: every pod
// sees node-0 as best and the pile-up shows (asserted: max >= 30, 3/4 of the
// burst, on one node).
//
// Both paths run the same burst. On the plugin path the Reserve RPC tells the
// scorer each placement inside the scheduling cycle, before the next pod is
// scored, so no pod is decided on a stale ledger: asserted max-min <= 2 (the
// ideal). The ledger-off run is the same on both paths (the scorer ignores
// Reserve when the ledger is off).
func TestBurstLedger(t *testing.T) { stack.EachPath(t, testBurstLedger) }

func testBurstLedger(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const nodes, pods = 8, 40
	pol := stack.Policy{Metrics: []stack.Metric{stack.CPUAvg5m}, Ledger: true, ScoreMapping: "rescale"}
	s := stack.New(ctx, t, stack.Options{
		Nodes:       nodes,
		CPUBusy:     func(i int) float64 { return 0.50 + 0.015*float64(i) },
		Policy:      pol,
		WaitMetrics: true,
	})
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch feeds the ledger")
	}
	s.StartScheduler(s.WaterlineScheduler(path))
	ns := "default"
	podOpts := []stack.PodOpt{stack.WithCPU("100m", "500m")}

	with := s.Burst(ns, "ledger-on", pods, podOpts...)
	loW, hiW := stack.MinMax(with)
	t.Logf("ledger on : %s (min %d, max %d)", stack.FmtCounts(with), loW, hiW)
	s.DeletePods(ns, "burst=ledger-on")

	// Ledger off: restart collector and scorer on the new policy.
	pol.Ledger = false
	s.WritePolicy(pol)
	s.Collector.RestartReady(ctx, t)
	s.Scorer.RestartReady(ctx, t)
	s.WaitMetrics(func(_ string, m map[string]float64) bool { _, ok := m["cpu_usage_avg_5m"]; return ok }, "metrics after restart")
	if path == stack.PluginPath {
		// The plugin's connection to the restarted scorer comes back with
		// grpc-go's backoff; a burst before that would fail open.
		s.WaitPluginRPCsOK(ns)
	}

	without := s.Burst(ns, "ledger-off", pods, podOpts...)
	loO, hiO := stack.MinMax(without)
	t.Logf("ledger off: %s (min %d, max %d)", stack.FmtCounts(without), loO, hiO)

	stack.AppendResult(t, "burst.txt", fmt.Sprintf("%s %s path: burst %d pods on %d nodes\nledger on : %s (max-min %d)\nledger off: %s (max-min %d)\n",
		time.Now().UTC().Format(time.RFC3339), path, pods, nodes, stack.FmtCounts(with), hiW-loW, stack.FmtCounts(without), hiO-loO))

	maxSpread, maxOn := 5, 10
	if path == stack.PluginPath {
		// Reserve in the cycle: every pod is scored on an up-to-date ledger.
		maxSpread, maxOn = 2, 6
	}
	if hiW-loW > maxSpread || hiW > maxOn {
		t.Errorf("%s path, ledger on: spread %s has max-min %d (want <= %d) or max %d (want <= %d)", path, stack.FmtCounts(with), hiW-loW, maxSpread, hiW, maxOn)
	}
	if hiO < 30 {
		t.Errorf("ledger off: expected the pile-up on the best node (max >= 30), got %s", stack.FmtCounts(without))
	}
	if hiO-loO <= hiW-loW {
		t.Errorf("ledger off (max-min %d) is not worse than ledger on (max-min %d)", hiO-loO, hiW-loW)
	}
}

// TestAntiColocation: 4 nodes; pods sharing a waterline.io/spread-group value
// must not share a node.
//   - a pair, the second created after the first reached the ledger: different nodes;
//   - a group of 4 created one after the other the same way: one per node, and a
//     5th member stays Pending with a reason naming the rule;
//   - a group of 4 created at once: logged, NOT asserted. On the extender path
//     the scorer learns a placement only through the pod watch (the extender
//     protocol has no Reserve in the scheduling cycle; the bind verb reserves
//     only after the Binding exists), so pods decided within that lag of each
//     other can share a node (seen: 2 of 4 on one node on a loaded machine).
//     Strict anti-colocation under bursts needs the plugin path (Reserve in
//     the scheduling cycle).
//
// On the plugin path the group of 4 created at once IS asserted (one per
// node): the Reserve RPC puts each placement, with its labels, into the
// scorer before the next pod's Filter RPC.
func TestAntiColocation(t *testing.T) { stack.EachPath(t, testAntiColocation) }

func testAntiColocation(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := stack.New(ctx, t, stack.Options{
		Nodes:       4,
		CPUBusy:     func(i int) float64 { return 0.20 + 0.01*float64(i) },
		Policy:      stack.Policy{Metrics: []stack.Metric{stack.CPUAvg5m, stack.MemAvg5m}, Ledger: true},
		WaitMetrics: true,
	})
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch, the scorer cannot see placed pods' labels")
	}
	s.StartScheduler(s.WaterlineScheduler(path))
	ns := "default"

	// one pod at a time, each after the previous one is in the ledger
	sequential := func(group string, n int) map[string]string {
		placed := map[string]string{}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("%s-%d", group, i)
			before, err := s.ScorerLedgerPercent()
			if err != nil {
				t.Fatal(err)
			}
			s.CreatePods([]*v1.Pod{stack.NewPod(ns, name, stack.WithLabels(stack.SpreadKey, group))}, 1)
			placed[name] = s.WaitScheduled(ns, []string{name}, 60*time.Second)[name]
			s.WaitLedger(ns, name)
			s.WaitScorerLedgerGrows(placed[name], before) // the next pod's Filter sees it
		}
		return placed
	}
	distinct := func(what string, placed map[string]string) {
		counts := s.CountPerNode(placed)
		t.Logf("%s: %s", what, stack.FmtCounts(counts))
		for n, c := range counts {
			if c > 1 {
				t.Errorf("%s: %d pods of one spread group share node %s (%s)", what, c, n, stack.FmtCounts(counts))
			}
		}
	}

	distinct("pair, one after the other", sequential("pair", 2))
	distinct("group of 4, one after the other", sequential("seq", 4))

	// A fifth member of "seq": every node holds one.
	s.CreatePods([]*v1.Pod{stack.NewPod(ns, "seq-extra", stack.WithLabels(stack.SpreadKey, "seq"))}, 1)
	msg := s.WaitFailedScheduling(ns, "seq-extra", "anti-colocation", 60*time.Second)
	t.Logf("seq-extra: %s", msg)
	if p, _ := s.Cluster.Client.CoreV1().Pods(ns).Get(ctx, "seq-extra", metav1.GetOptions{}); p != nil && p.Spec.NodeName != "" {
		t.Errorf("seq-extra bound to %s although every node holds a 'seq' pod", p.Spec.NodeName)
	}
	if !strings.Contains(msg, stack.SpreadKey) {
		t.Errorf("the FailedScheduling message does not name %s: %q", stack.SpreadKey, msg)
	}

	// Four at once: on the extender path the watch-lag limitation (logged
	// only); on the plugin path asserted.
	names := stack.PodNames("burst", 4)
	var pods []*v1.Pod
	for _, n := range names {
		pods = append(pods, stack.NewPod(ns, n, stack.WithLabels(stack.SpreadKey, "burst")))
	}
	s.CreatePods(pods, 4)
	counts := s.CountPerNode(s.WaitScheduled(ns, names, 90*time.Second))
	_, hi := stack.MinMax(counts)
	switch {
	case hi <= 1:
		t.Logf("%s path: group of 4 created at once: %s (one per node)", path, stack.FmtCounts(counts))
	case path == stack.PluginPath:
		t.Errorf("plugin path: group of 4 created at once shares nodes: %s (Reserve in the cycle should keep them apart)", stack.FmtCounts(counts))
	default:
		t.Logf("KNOWN LIMITATION (extender path): group of 4 created at once shares nodes: %s", stack.FmtCounts(counts))
	}
	stack.AppendResult(t, "anti-colocation.txt", fmt.Sprintf("%s %s path: group of 4 created at once on 4 nodes: %s\n", time.Now().UTC().Format(time.RFC3339), path, stack.FmtCounts(counts)))
}

// TestFailureRecovery: 10 nodes, node-3 at 90 % cpu.
//  1. the stack works: 5 pods, none on node-3;
//  2. the scorer is killed (SIGKILL) while 20 pods are being created and
//     scheduled: they all still schedule (the extender
//     answers neutrally after its scorer timeout; the scheduler has it as
//     ignorable);
//  3. the scorer is restarted: 10 pods, none on node-3 (waterline decides again);
//  4. the collector is restarted (SIGTERM): its ledger is rebuilt from the pod
//     list with the same pods, nodes and placement times (ListNodes before/after),
//     and 5 more pods still avoid node-3.
//
// On the plugin path step 2 is the plugin failing open (every node passes,
// equal scores; counted in waterline_plugin_fail_open_total), and step 3 first
// waits until the plugin's gRPC connection is back (a probe pod scheduled
// without a new fail-open), since grpc-go reconnects with backoff.
func TestFailureRecovery(t *testing.T) { stack.EachPath(t, testFailureRecovery) }

func testFailureRecovery(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const hot = 3
	hotName := stack.NodeName(hot)
	s := stack.New(ctx, t, stack.Options{
		Nodes: 10,
		CPUBusy: func(i int) float64 {
			if i == hot {
				return 0.9
			}
			return 0.10 + 0.02*float64(i)
		},
		MemoryUsed:  0.2,
		Policy:      stack.Policy{Metrics: []stack.Metric{stack.CPUAvg5m.WithFilter(65), stack.MemAvg5m.WithFilter(65)}, Ledger: true},
		WaitMetrics: true,
	})
	s.WaitMetrics(func(n string, m map[string]float64) bool {
		return n != hotName || m["cpu_usage_avg_5m"] > 65
	}, "node-3 above the threshold")
	s.StartScheduler(s.WaterlineScheduler(path))
	ns := "default"
	batch := func(prefix string, n int) map[string]int {
		names := stack.PodNames(prefix, n)
		var pods []*v1.Pod
		for _, name := range names {
			pods = append(pods, stack.NewPod(ns, name))
		}
		t0 := time.Now()
		s.CreatePods(pods, n)
		c := s.CountPerNode(s.WaitScheduled(ns, names, 2*time.Minute))
		t.Logf("%s: %d pods bound in %v: %s", prefix, n, time.Since(t0).Round(time.Millisecond), stack.FmtCounts(c))
		return c
	}

	// 1. baseline
	if c := batch("before", 5); c[hotName] != 0 {
		t.Errorf("before: %d pods on the hot node", c[hotName])
	}

	// 2. scorer killed mid-run: 20 pods created one every 50 ms; the scorer
	// is SIGKILLed after the 5th is bound. Every pod still binds.
	failOpens0 := stack.PluginFailOpens()
	evaluateFO0 := stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Evaluate")
	filterFO0 := stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Filter")
	scoreFO0 := stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Score")
	reserveFO0 := stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Reserve")
	{
		names := stack.PodNames("scorer-down", 20)
		created := make(chan error, 1)
		t0 := time.Now()
		go func() {
			for _, n := range names {
				if _, err := s.Cluster.Client.CoreV1().Pods(ns).Create(ctx, stack.NewPod(ns, n), metav1.CreateOptions{}); err != nil {
					created <- err
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			created <- nil
		}()
		s.WaitScheduled(ns, names[:5], time.Minute)
		s.Scorer.Kill()
		t.Logf("scorer killed %v after the first pod was created (5 bound)", time.Since(t0).Round(time.Millisecond))
		if err := <-created; err != nil {
			t.Fatal(err)
		}
		down := s.CountPerNode(s.WaitScheduled(ns, names, 2*time.Minute))
		t.Logf("scorer-down: 20 pods bound in %v: %s (%d on the hot node: with neutral answers any node may win)",
			time.Since(t0).Round(time.Millisecond), stack.FmtCounts(down), down[hotName])
		if path == stack.PluginPath {
			fo := stack.PluginFailOpens() - failOpens0
			t.Logf("plugin: waterline_plugin_fail_open_total +%.0f while the scorer was down (Evaluate %.0f, Filter %.0f, Score %.0f, Reserve %.0f)", fo,
				stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Evaluate")-evaluateFO0,
				stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Filter")-filterFO0,
				stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Score")-scoreFO0,
				stack.PluginCounter("waterline_plugin_fail_open_total", "rpc", "Reserve")-reserveFO0)
			if fo < 1 {
				t.Errorf("plugin path: the scorer was killed but the plugin never failed open (waterline_plugin_fail_open_total did not move)")
			}
		}
	}

	// 3. scorer back
	s.Scorer.RestartReady(ctx, t)
	if path == stack.PluginPath {
		s.WaitPluginRPCsOK(ns)
	}
	if c := batch("scorer-back", 10); c[hotName] != 0 {
		t.Errorf("scorer back: %d pods on the hot node", c[hotName])
	}

	// 4. collector restart: same ledger
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch to rebuild the ledger from")
	}
	for _, p := range append(append(stack.PodNames("before", 5), stack.PodNames("scorer-down", 20)...), stack.PodNames("scorer-back", 10)...) {
		s.WaitLedger(ns, p)
	}
	before, err := s.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	s.Collector.RestartReady(ctx, t)
	var after map[string]*wlv1.LedgerEntry
	err = stack.WaitFor(ctx, 60*time.Second, 300*time.Millisecond, "ledger rebuilt", func() (bool, error) {
		l, err := s.Ledger()
		if err != nil {
			return false, err
		}
		after = l
		for uid := range before {
			if _, ok := l[uid]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v: before %d entries, after %d", err, len(before), len(after))
	}
	// A restarted collector knows a placement only from the pod's PodScheduled condition,
	// which the API stores with one-second precision. On the plugin path the entry was
	// created by Reserve (millisecond time, kept when the watch confirmed it: the earliest
	// time wins), so the rebuilt time is the bind's second instead. Either time is right;
	// anything else is a real change (say, the restart's clock).
	pods, err := s.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduledAt := map[string]time.Time{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue {
				scheduledAt[string(p.UID)] = c.LastTransitionTime.Time
			}
		}
	}
	same := 0
	for uid, b := range before {
		a := after[uid]
		at := a.GetPlacedAt().AsTime()
		kept := at.Equal(b.GetPlacedAt().AsTime()) || at.Equal(scheduledAt[uid])
		if !kept || a.GetNodeName() != b.GetNodeName() {
			t.Errorf("ledger entry %s/%s changed across the collector restart: before %s on %s (%v), after %s on %s (%v)",
				b.GetNamespace(), b.GetName(), b.GetPlacedAt().AsTime().Format(time.RFC3339Nano), b.GetNodeName(), b.GetSource(),
				a.GetPlacedAt().AsTime().Format(time.RFC3339Nano), a.GetNodeName(), a.GetSource())
			continue
		}
		same++
	}
	t.Logf("collector restart: %d/%d ledger entries kept pod, node and placed_at to the API's second (e.g. %s)", same, len(before), sampleEntry(before))
	if len(after) != len(before) {
		t.Errorf("ledger has %d entries after the restart, %d before", len(after), len(before))
	}
	if c := batch("collector-back", 5); c[hotName] != 0 {
		t.Errorf("after collector restart: %d pods on the hot node", c[hotName])
	}
}

func sampleEntry(l map[string]*wlv1.LedgerEntry) string {
	for _, e := range l {
		return fmt.Sprintf("%s/%s on %s placed_at %s source %v absorb_remaining %v", e.GetNamespace(), e.GetName(), e.GetNodeName(),
			e.GetPlacedAt().AsTime().Format(time.RFC3339), e.GetSource(), e.GetAbsorbRemaining().AsDuration().Round(time.Second))
	}
	return "(empty)"
}
