package waterline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

const testWeight = 5

// testFramework is a scheduling framework for one profile with Waterline enabled through
// multiPoint (as in config/scheduler-config.yaml), over a fixed set of nodes.
type testFramework struct {
	fw       framework.Framework
	snapshot *cache.Snapshot
	nodes    []*v1.Node
}

func newTestFramework(t *testing.T, factory frameworkruntime.PluginFactory, args map[string]any, nodeCount int) *testFramework {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	nodes := make([]*v1.Node, nodeCount)
	for i := range nodes {
		nodes[i] = st.MakeNode().Name(nodeName(i)).Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "110"}).Obj()
	}
	snapshot := cache.NewSnapshot(nil, nodes)
	registerWaterline := func(reg *frameworkruntime.Registry, profile *schedulerapi.KubeSchedulerProfile) {
		if err := reg.Register(Name, factory); err != nil {
			t.Fatal(err)
		}
		profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled, schedulerapi.Plugin{Name: Name, Weight: testWeight})
		profile.PluginConfig = append(profile.PluginConfig, schedulerapi.PluginConfig{Name: Name, Args: rawArgs(t, args)})
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		registerWaterline,
	}, "waterline-scheduler", frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		t.Fatalf("creating framework: %v", err)
	}
	return &testFramework{fw: fw, snapshot: snapshot, nodes: nodes}
}

// cycleResult is what one scheduling cycle decided.
type cycleResult struct {
	state     fwk.CycleState
	preFilter *fwk.Status
	feasible  []string
	// scores is Waterline's weighted score per scored node.
	scores map[string]int64
	node   string
}

// runCycle drives one pod through the framework the way the scheduler's scheduleOne does:
// PreFilter, Filter on the nodes PreFilter left, PreScore and Score on the feasible ones,
// then Reserve on the best.
func (tfw *testFramework) runCycle(t *testing.T, pod *v1.Pod) cycleResult {
	t.Helper()
	ctx := context.Background()
	res := cycleResult{state: framework.NewCycleState(), scores: map[string]int64{}}
	preRes, status, _ := tfw.fw.RunPreFilterPlugins(ctx, res.state, pod)
	if !status.IsSuccess() {
		res.preFilter = status
		return res
	}
	var feasible []fwk.NodeInfo
	for _, n := range tfw.nodes {
		if !preRes.AllNodes() && !preRes.NodeNames.Has(n.Name) {
			continue
		}
		ni, err := tfw.snapshot.NodeInfos().Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if s := tfw.fw.RunFilterPlugins(ctx, res.state, pod, ni); s.IsSuccess() {
			feasible = append(feasible, ni)
			res.feasible = append(res.feasible, n.Name)
		}
	}
	if len(feasible) == 0 {
		return res
	}
	if s := tfw.fw.RunPreScorePlugins(ctx, res.state, pod, feasible); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s)
	}
	totals, s := tfw.fw.RunScorePlugins(ctx, res.state, pod, feasible)
	if !s.IsSuccess() {
		t.Fatalf("Score: %v", s)
	}
	best := int64(-1)
	for _, nps := range totals {
		for _, ps := range nps.Scores {
			if ps.Name == Name {
				res.scores[nps.Name] = ps.Score
			}
		}
		if nps.TotalScore > best {
			best, res.node = nps.TotalScore, nps.Name
		}
	}
	if s := tfw.fw.RunReservePluginsReserve(ctx, res.state, pod, res.node); !s.IsSuccess() {
		t.Fatalf("Reserve: %v", s)
	}
	return res
}

func testPod() *v1.Pod {
	return st.MakePod().Namespace("shop").Name("web-1").UID("uid-web-1").
		SchedulerName("waterline-scheduler").Label("app", "web").
		Req(map[v1.ResourceName]string{"cpu": "500m", "memory": "1Gi"}).Obj()
}

// rejectNode1 is a fake's reject: node 1 is over the cpu filter, every other node fits.
func rejectNode1(n string) string {
	if n == nodeName(1) {
		return "cpu_usage_avg_5m predicted 81% > 65%"
	}
	return ""
}

// scoreOf is the fake's score for a node: distinct per node, with node 7 the best.
func scoreOf(node string) int64 {
	if node == nodeName(7) {
		return 99
	}
	var sum int64
	for _, c := range node {
		sum += int64(c)
	}
	return sum % 90
}

// TestOneBlockingCallPerCycle: each scheduling cycle waits on the scorer once (the Evaluate
// on the Session stream); the Reserve is written and not waited for; no unary RPC is made.
// The node table crosses the stream once; Score hands back exactly the Evaluate's scores.
func TestOneBlockingCallPerCycle(t *testing.T) {
	for _, nodeCount := range []int{3, 500, 5000} {
		t.Run(nodeName(nodeCount), func(t *testing.T) {
			fake := &fakeScorer{
				nodes: nodeNamesUpTo(nodeCount),
				reject: func(n string) string {
					if n == nodeName(1) || n == nodeName(400) {
						return "cpu_usage_avg_5m predicted 81% > 65%"
					}
					return ""
				},
				score: scoreOf,
			}
			var pl *Waterline
			tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), fakeArgs(), nodeCount)
			wantFeasible := nodeCount - 1
			if nodeCount > 400 {
				wantFeasible--
			}

			const cycles = 3
			for i := range cycles {
				pod := testPod()
				pod.Name, pod.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-web-%d", i))
				before := pl.roundTrips.Load()

				res := tfw.runCycle(t, pod)

				if got := pl.roundTrips.Load() - before; got != 1 {
					t.Fatalf("cycle %d waited on the scorer %d times, want 1", i, got)
				}
				if filters, scores, reserves, unreserves := fake.calls(); filters+scores+reserves+unreserves != 0 {
					t.Fatalf("unary RPCs Filter/Score/Reserve/Unreserve = %d/%d/%d/%d, want none", filters, scores, reserves, unreserves)
				}
				log := fake.waitSession(t, "the cycle's Reserve", func(l []sessionMsg) bool { return len(of(l, "reserve")) == i+1 })
				if evaluates, _, _ := fake.sessionCalls(); evaluates != i+1 {
					t.Fatalf("after %d cycle(s): %d Evaluates, want one per cycle", i+1, evaluates)
				}
				ev := of(log, "evaluate")[i]
				// The first Evaluate asks for the table; later ones hold it.
				wantGen := uint64(1)
				if i == 0 {
					wantGen = 0
				}
				if ev.generation != wantGen {
					t.Errorf("Evaluate %d said it holds table generation %d, want %d", i, ev.generation, wantGen)
				}
				if p := ev.pod; p.GetCpuRequestMillis() != 500 || p.GetMemoryRequestBytes() != 1<<30 || p.GetLabels()["app"] != "web" ||
					p.GetSchedulerName() != "waterline-scheduler" || p.GetUid() != string(pod.UID) {
					t.Errorf("Evaluate PodInfo = %v", p)
				}
				if len(res.feasible) != wantFeasible || slices.Contains(res.feasible, nodeName(1)) {
					t.Errorf("feasible = %d nodes (node-001 in: %v), want %d without the rejected", len(res.feasible), slices.Contains(res.feasible, nodeName(1)), wantFeasible)
				}
				// Score hands back exactly the Evaluate's score per node (times the weight).
				if len(res.scores) != wantFeasible {
					t.Errorf("scored %d nodes, want %d", len(res.scores), wantFeasible)
				}
				for n, s := range res.scores {
					if want := scoreOf(n) * testWeight; s != want {
						t.Errorf("Waterline score of %s = %d, want %d", n, s, want)
					}
				}
				if nodeCount > 7 && res.node != nodeName(7) {
					t.Errorf("pod placed on %s, want the best-scored %s", res.node, nodeName(7))
				}
				// The Reserve carries the pod and the chosen node, and the scorer handles it
				// before the next cycle's Evaluate (stream order).
				r := of(log, "reserve")[i]
				if r.node != res.node || r.pod.GetUid() != string(pod.UID) || r.pod.GetName() != pod.Name {
					t.Errorf("Reserve(%s, %s/%s), want (%s, %s/%s)", r.node, r.pod.GetUid(), r.pod.GetName(), res.node, pod.UID, pod.Name)
				}
			}
			var order []string
			for _, m := range fake.sessionLog() {
				order = append(order, m.kind)
			}
			if want := []string{"evaluate", "reserve", "evaluate", "reserve", "evaluate", "reserve"}; !slices.Equal(order, want) {
				t.Errorf("session messages %v, want %v", order, want)
			}
		})
	}
}

// A Reserve written before the next PreFilter is handled by the scorer before that
// PreFilter's Evaluate, although Reserve returns without waiting: here the fake holds the
// Reserve, Reserve returns anyway, and the next Evaluate waits behind it in the stream. The
// fake's scores count the Reserves it has handled (a ledger), so the second pod goes
// elsewhere.
func TestReserveIsSeenBeforeTheNextEvaluate(t *testing.T) {
	gate := make(chan struct{})
	fake := &fakeScorer{nodes: nodeNamesUpTo(10), reserveGate: gate}
	fake.score = func(n string) int64 {
		for _, r := range of(fake.sessionLog(), "reserve") {
			if r.node == n {
				return 0
			}
		}
		return scoreOf(n)
	}
	var pl *Waterline
	tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), fakeArgs(), 10)

	start := time.Now()
	first := tfw.runCycle(t, testPod()) // its Reserve is held by the fake
	if first.node != nodeName(7) {
		t.Fatalf("first pod on %s, want %s", first.node, nodeName(7))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the cycle took %v: Reserve waited for the scorer", d)
	}
	if got := pl.roundTrips.Load(); got != 1 {
		t.Fatalf("round trips = %d after one cycle with a held Reserve, want 1", got)
	}

	second := testPod()
	second.Name, second.UID = "web-2", "uid-web-2"
	done := make(chan cycleResult)
	go func() { done <- tfw.runCycle(t, second) }()
	time.Sleep(100 * time.Millisecond)
	if evaluates, reserves, _ := fake.sessionCalls(); evaluates != 1 || reserves != 0 {
		t.Fatalf("with the Reserve held: %d Evaluates, %d Reserves handled; want 1 and 0 (the Evaluate waits behind the Reserve)", evaluates, reserves)
	}
	close(gate)
	res := <-done
	if res.node == nodeName(7) {
		t.Errorf("second pod on %s too: its Evaluate did not see the first pod's Reserve", res.node)
	}
	log := fake.waitSession(t, "the second Reserve", func(l []sessionMsg) bool { return len(of(l, "reserve")) == 2 })
	if log[0].kind != "evaluate" || log[1].kind != "reserve" || log[1].pod.GetUid() != "uid-web-1" || log[2].kind != "evaluate" || log[2].pod.GetUid() != "uid-web-2" {
		t.Fatalf("session order %v, want evaluate(web-1), reserve(web-1), evaluate(web-2), ...", log)
	}
}

// The fake drops the stream when the 8th message arrives (an Evaluate): that cycle fails
// open at once; the Reserves and the Unreserve the scorer never acknowledged arrive again,
// in order, on the new stream, before anything new; acknowledged ones are not resent.
func TestReplayAfterABrokenStream(t *testing.T) {
	fake := &fakeScorer{nodes: nodeNamesUpTo(5), score: scoreOf, dropAfter: 7}
	var pl *Waterline
	tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), fakeArgs(), 5)
	pods := make([]*v1.Pod, 6)
	for i := range pods {
		pods[i] = testPod()
		pods[i].Name, pods[i].UID = fmt.Sprintf("web-%d", i+1), types.UID(fmt.Sprintf("uid-web-%d", i+1))
	}
	// Stream 1: evaluate#1 reserve#1 evaluate#2 (ack 1) reserve#2 evaluate#3 (ack 2)
	// reserve#3 unreserve#4: seven messages handled, #3 and #4 never acknowledged.
	var placed []cycleResult
	for _, pod := range pods[:3] {
		placed = append(placed, tfw.runCycle(t, pod))
	}
	tfw.fw.RunReservePluginsUnreserve(context.Background(), placed[2].state, pods[2], placed[2].node)
	fake.waitSession(t, "seven messages", func(l []sessionMsg) bool { return len(l) == 7 })

	before := counterValue(t, "Evaluate")
	start := time.Now()
	res := tfw.runCycle(t, pods[3]) // evaluate#4 arrives: the fake drops the stream
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the cycle whose stream broke took %v; it must fail open at once, not after the 10s timeout", d)
	}
	assertFailedOpen(t, tfw, res)
	if after := counterValue(t, "Evaluate"); after != before+1 {
		t.Fatalf("fail-open counter for Evaluate went %v -> %v, want +1", before, after)
	}
	// The failed-open cycle's Reserve (#5) waits for the new stream with #3 and #4.
	log := fake.waitSession(t, "the replay on a second stream", func(l []sessionMsg) bool {
		n := 0
		for _, m := range l {
			if m.stream == 2 {
				n++
			}
		}
		return n == 3
	})
	var second []string
	for _, m := range log {
		if m.stream == 2 {
			second = append(second, fmt.Sprintf("%s#%d", m.kind, m.id))
		}
	}
	if want := []string{"reserve#3", "unreserve#4", "reserve#5"}; !slices.Equal(second, want) {
		t.Fatalf("second stream began with %v, want %v (the unacknowledged, in order; nothing acknowledged)", second, want)
	}
	if r := of(log, "reserve"); r[len(r)-1].pod.GetUid() != "uid-web-4" || r[len(r)-1].node != res.node {
		t.Errorf("replayed reserve#5 = %v, want web-4 on %s", r[len(r)-1], res.node)
	}

	// The next cycle evaluates on the new stream after the replay; the answer's ack
	// leaves nothing unacknowledged.
	before = float64(pl.roundTrips.Load())
	res = tfw.runCycle(t, pods[4])
	if res.preFilter != nil || len(res.feasible) != 5 || res.node == "" {
		t.Fatalf("cycle after the reopen: PreFilter %v, feasible %v", res.preFilter, res.feasible)
	}
	if got := float64(pl.roundTrips.Load()) - before; got != 1 {
		t.Fatalf("cycle after the reopen waited %v times, want 1", got)
	}
	for n, s := range res.scores {
		if s != scoreOf(n)*testWeight {
			t.Errorf("score of %s = %d after the reopen, want %d", n, s, scoreOf(n)*testWeight)
		}
	}
	log = fake.waitSession(t, "the reserve after the reopen", func(l []sessionMsg) bool { return len(of(l, "reserve")) == 6 })
	if ev := of(log, "evaluate"); ev[len(ev)-1].stream != 2 || ev[len(ev)-1].generation != 0 {
		t.Errorf("last Evaluate %v (generation %d), want on stream 2 asking for a fresh table", ev[len(ev)-1], ev[len(ev)-1].generation)
	}
	pl.session.mu.Lock()
	unacked := len(pl.session.unacked)
	pl.session.mu.Unlock()
	if unacked != 1 {
		t.Errorf("%d messages unacknowledged, want only the last Reserve (#6)", unacked)
	}
}

// An Evaluate the scorer cannot evaluate is answered with an error: that cycle fails open
// (counted by the code the unary RPC would have had), the stream stays open and the next
// pod is evaluated on it.
func TestAnErrorAnswerFailsOpenAndKeepsTheStream(t *testing.T) {
	fake := &fakeScorer{nodes: nodeNamesUpTo(4), score: scoreOf, evalError: func(p *waterlinev1.PodInfo) string {
		if p.GetName() == "bad" {
			return "pod.cpu_request_millis must not be negative"
		}
		return ""
	}}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 4)
	bad := testPod()
	bad.Name = "bad"
	before := counterValue(t, "Evaluate")
	errs0, err := testutil.GetCounterMetricValue(rpcErrors.WithLabelValues("Evaluate", "InvalidArgument"))
	if err != nil {
		t.Fatal(err)
	}
	assertFailedOpen(t, tfw, tfw.runCycle(t, bad))
	if after := counterValue(t, "Evaluate"); after != before+1 {
		t.Fatalf("fail-open counter for Evaluate went %v -> %v, want +1", before, after)
	}
	if errs, _ := testutil.GetCounterMetricValue(rpcErrors.WithLabelValues("Evaluate", "InvalidArgument")); errs != errs0+1 {
		t.Fatalf("errors{Evaluate, InvalidArgument} went %v -> %v, want +1", errs0, errs)
	}
	res := tfw.runCycle(t, testPod())
	if res.preFilter != nil || res.node == "" || len(res.feasible) != 4 {
		t.Fatalf("next cycle: PreFilter %v, node %s", res.preFilter, res.node)
	}
	for n, s := range res.scores {
		if s != scoreOf(n)*testWeight {
			t.Errorf("score of %s = %d, want %d", n, s, scoreOf(n)*testWeight)
		}
	}
	fake.mu.Lock()
	sessions := fake.sessions
	fake.mu.Unlock()
	if sessions != 1 {
		t.Errorf("%d streams opened, want 1 (an error answer leaves the stream open)", sessions)
	}
}

// resolve refuses an answer that does not fit its node table.
func TestResolveRejectsAnswersThatDoNotFitTheTable(t *testing.T) {
	table := newNodeTable(&waterlinev1.NodeTable{Generation: 3, NodeNames: []string{"a", "b"}})
	for name, ev := range map[string]*waterlinev1.SessionEvaluation{
		"too few scores":    {NodeTableGeneration: 3, Scores: []int32{1}},
		"index outside":     {NodeTableGeneration: 3, Scores: []int32{1, -1}, RejectedIndexes: []uint32{2}, RejectedReasons: []string{"x"}},
		"reasons unaligned": {NodeTableGeneration: 3, Scores: []int32{1, -1}, RejectedIndexes: []uint32{1}},
	} {
		if _, err := resolve(ev, table); status.Code(err) != codes.Internal {
			t.Errorf("%s: resolve = %v, want Internal", name, err)
		}
	}
	got, err := resolve(&waterlinev1.SessionEvaluation{NodeTableGeneration: 3, Scores: []int32{7, -1}, RejectedIndexes: []uint32{1},
		RejectedReasons: []string{"hot"}, UnknownNodeScore: 50}, table)
	if err != nil {
		t.Fatal(err)
	}
	if got.rejected["b"] != "hot" || got.score("a") != 7 || got.score("b") != 0 || got.score("c") != 50 {
		t.Errorf("resolved %+v: rejected %v, scores a=%d b=%d c=%d", got, got.rejected, got.score("a"), got.score("b"), got.score("c"))
	}
}

// A scorer older than Session answers it with UNIMPLEMENTED: the plugin asks with the unary
// Filter, Score, Reserve and Unreserve RPCs instead, from the first cycle on, without
// failing open and without trying Session again every cycle.
func TestUnimplementedSessionFallsBackToUnaryRPCs(t *testing.T) {
	fake := &fakeScorer{
		noSession: true,
		nodes:     nodeNamesUpTo(10),
		reject:    rejectNode1,
		score:     scoreOf,
	}
	var pl *Waterline
	tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), fakeArgs(), 10)
	failOpens0 := counterValue(t, "Evaluate") + counterValue(t, "Filter") + counterValue(t, "Score")

	for i := range 2 {
		pod := testPod()
		res := tfw.runCycle(t, pod)
		if res.preFilter != nil || len(res.feasible) != 9 || slices.Contains(res.feasible, nodeName(1)) {
			t.Fatalf("cycle %d: PreFilter %v, feasible %v; want the 9 nodes the Filter RPC left", i, res.preFilter, res.feasible)
		}
		if res.node != nodeName(7) {
			t.Fatalf("cycle %d: pod on %s, want %s", i, res.node, nodeName(7))
		}
		for n, s := range res.scores {
			if s != scoreOf(n)*testWeight {
				t.Errorf("score of %s = %d, want %d", n, s, scoreOf(n)*testWeight)
			}
		}
		if filters, scores, reserves, _ := fake.calls(); filters != i+1 || scores != i+1 || reserves != i+1 {
			t.Fatalf("after %d cycle(s): Filter/Score/Reserve RPCs = %d/%d/%d, want one each per cycle", i+1, filters, scores, reserves)
		}
		if i == 0 {
			tfw.fw.RunReservePluginsUnreserve(context.Background(), res.state, pod, res.node)
			if _, _, _, unreserves := fake.calls(); unreserves != 1 {
				t.Fatalf("Unreserve RPCs = %d, want 1", unreserves)
			}
		}
	}
	fake.mu.Lock()
	sessions := fake.sessions
	fake.mu.Unlock()
	if sessions != 1 {
		t.Errorf("Session tried %d times, want once (then the unary RPCs until the re-probe)", sessions)
	}
	if after := counterValue(t, "Evaluate") + counterValue(t, "Filter") + counterValue(t, "Score"); after != failOpens0 {
		t.Errorf("fail-open counters moved %v -> %v: an older scorer is no failure", failOpens0, after)
	}
	// Cycle 1: the Evaluate answered UNIMPLEMENTED, Filter, Score, Reserve; the Unreserve;
	// cycle 2: Filter, Score, Reserve.
	if got := pl.roundTrips.Load(); got != 4+1+3 {
		t.Errorf("calls waited on = %d, want 8", got)
	}
}

// With `session: false` the plugin never opens a Session stream, even to a scorer that
// serves one: one cycle (PreFilter, Filter, PreScore, Score, Reserve) makes exactly one unary
// Filter (all_nodes), one Score and one Reserve RPC, each waited for (three round trips),
// and an Unreserve is the unary RPC too.
func TestSessionFalseUsesOnlyTheUnaryRPCs(t *testing.T) {
	fake := &fakeScorer{
		nodes:  nodeNamesUpTo(10),
		reject: rejectNode1,
		score:  scoreOf,
	}
	args := fakeArgs()
	args["session"] = false
	var pl *Waterline
	tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), args, 10)

	pod := testPod()
	res := tfw.runCycle(t, pod)
	if res.preFilter != nil || len(res.feasible) != 9 || slices.Contains(res.feasible, nodeName(1)) {
		t.Fatalf("PreFilter %v, feasible %v; want the 9 nodes the Filter RPC left", res.preFilter, res.feasible)
	}
	if res.node != nodeName(7) {
		t.Fatalf("pod on %s, want %s", res.node, nodeName(7))
	}
	for n, s := range res.scores {
		if s != scoreOf(n)*testWeight {
			t.Errorf("score of %s = %d, want %d", n, s, scoreOf(n)*testWeight)
		}
	}
	if filters, scores, reserves, unreserves := fake.calls(); filters != 1 || scores != 1 || reserves != 1 || unreserves != 0 {
		t.Fatalf("Filter/Score/Reserve/Unreserve RPCs = %d/%d/%d/%d, want 1/1/1/0", filters, scores, reserves, unreserves)
	}
	fake.mu.Lock()
	filter, score := fake.filters[0], fake.scores[0]
	fake.mu.Unlock()
	if !filter.GetAllNodes() || len(filter.GetNodeNames()) != 0 {
		t.Errorf("Filter RPC all_nodes %v with %d names, want all_nodes and no names", filter.GetAllNodes(), len(filter.GetNodeNames()))
	}
	if got := score.GetNodeNames(); len(got) != 9 || slices.Contains(got, nodeName(1)) {
		t.Errorf("Score RPC names %v, want the 9 feasible nodes", got)
	}
	if got := pl.roundTrips.Load(); got != 3 {
		t.Errorf("calls waited on = %d, want 3 (Filter, Score, Reserve)", got)
	}
	tfw.fw.RunReservePluginsUnreserve(context.Background(), res.state, pod, res.node)
	if _, _, _, unreserves := fake.calls(); unreserves != 1 {
		t.Fatalf("Unreserve RPCs = %d, want 1", unreserves)
	}
	fake.mu.Lock()
	sessions, handled := fake.sessions, len(fake.handled)
	fake.mu.Unlock()
	if sessions != 0 || handled != 0 {
		t.Errorf("Session streams opened %d, messages on them %d; want none", sessions, handled)
	}
}

// Filter reports the RPC's reason for a rejected node as Unschedulable. The scheduler runs
// Filter on such a node when it is the pod's nominated node (and in preemption dry runs).
func TestFilterReportsRejectionReason(t *testing.T) {
	const reason = "mem_usage_max_avg_1h predicted 90% > 75%"
	// The scorer also knows a node the scheduler no longer has; its rejection must not
	// count against (or add to) this cycle's nodes.
	fake := &fakeScorer{nodes: append(nodeNamesUpTo(4), "drained-node"), reject: func(n string) string {
		if n == nodeName(2) || n == "drained-node" {
			return reason
		}
		return ""
	}}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 4)
	res := tfw.runCycle(t, testPod())
	if len(res.feasible) != 3 {
		t.Fatalf("feasible = %v, want 3 nodes", res.feasible)
	}

	rejected, _ := tfw.snapshot.NodeInfos().Get(nodeName(2))
	s := tfw.fw.RunFilterPlugins(context.Background(), res.state, testPod(), rejected)
	if s.Code() != fwk.Unschedulable || s.Plugin() != Name || !strings.Contains(s.Message(), "90 percent > 75 percent") {
		t.Fatalf("Filter on rejected node = %v (plugin %q), want Unschedulable from %s with %q", s, s.Plugin(), Name, reason)
	}
	accepted, _ := tfw.snapshot.NodeInfos().Get(nodeName(0))
	if s := tfw.fw.RunFilterPlugins(context.Background(), res.state, testPod(), accepted); !s.IsSuccess() {
		t.Fatalf("Filter on feasible node = %v, want success", s)
	}
	if evaluates, _, _ := fake.sessionCalls(); evaluates != 1 {
		t.Fatalf("Evaluates = %d, want 1 (Filter must read CycleState, not call out)", evaluates)
	}
}

func TestAllNodesRejected(t *testing.T) {
	fake := &fakeScorer{nodes: nodeNamesUpTo(3), reject: func(string) string { return "cpu_usage_avg_5m predicted 99% > 65%" }}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 3)
	res := tfw.runCycle(t, testPod())
	if res.preFilter.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter = %v, want UnschedulableAndUnresolvable", res.preFilter)
	}
	if msg := res.preFilter.Message(); !strings.Contains(msg, "rejected all 3 node(s)") || !strings.Contains(msg, "99 percent > 65 percent") {
		t.Fatalf("PreFilter message %q does not explain the rejection", msg)
	}
	// The message becomes the format string of the FailedScheduling event: no '%' in it.
	if msg := res.preFilter.Message(); strings.Contains(msg, "%") {
		t.Fatalf("PreFilter message %q contains '%%', which Eventf would mangle", msg)
	}
	if evaluates, reserves, _ := fake.sessionCalls(); evaluates != 1 || reserves != 0 {
		t.Fatalf("Evaluates/Reserves = %d/%d after a rejection, want 1/0", evaluates, reserves)
	}
}

// assertFailedOpen checks that a cycle passed every node and gave each the neutral score.
func assertFailedOpen(t *testing.T, tfw *testFramework, res cycleResult) {
	t.Helper()
	if res.preFilter != nil {
		t.Fatalf("PreFilter = %v, want success", res.preFilter)
	}
	if len(res.feasible) != len(tfw.nodes) {
		t.Fatalf("feasible = %d nodes, want all %d", len(res.feasible), len(tfw.nodes))
	}
	for n, s := range res.scores {
		if s != NeutralScore*testWeight {
			t.Errorf("score of %s = %d, want neutral %d", n, s, NeutralScore*testWeight)
		}
	}
	if len(res.scores) != len(tfw.nodes) || res.node == "" {
		t.Fatalf("scored %d nodes and placed on %q, want all scored and a placement", len(res.scores), res.node)
	}
}

// A stuck scorer (it takes 10 s to answer): the cycle fails open within the 300ms timeout,
// all nodes pass with equal scores. After sessionMaxOverdue overdue answers in a row the
// stream is abandoned and a new one opened, which starts with the unacknowledged Reserves.
func TestFailOpenOnTimeout(t *testing.T) {
	fake := &fakeScorer{
		delay:  10 * time.Second, // far beyond the plugin's timeout
		nodes:  nodeNamesUpTo(5),
		reject: func(string) string { return "never seen" },
		score:  scoreOf,
	}
	var pl *Waterline
	tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), map[string]any{"endpoint": "127.0.0.1:50051", "timeout": "300ms"}, 5)
	before := counterValue(t, "Evaluate")

	for i := range sessionMaxOverdue {
		start := time.Now()
		res := tfw.runCycle(t, testPod())
		elapsed := time.Since(start)

		assertFailedOpen(t, tfw, res)
		// The timeout plus scheduling slack on a loaded machine; the fake holds 10 s.
		if elapsed > 2*time.Second {
			t.Fatalf("cycle %d took %v; the 300ms timeout was not applied", i, elapsed)
		}
		if after := counterValue(t, "Evaluate"); after != before+float64(i+1) {
			t.Fatalf("fail-open counter for Evaluate went %v -> %v, want +%d", before, after, i+1)
		}
	}
	if got := pl.roundTrips.Load(); got != sessionMaxOverdue {
		t.Fatalf("calls waited on = %d, want one per cycle (%d)", got, sessionMaxOverdue)
	}
	if filters, scores, reserves, _ := fake.calls(); filters+scores+reserves != 0 {
		t.Fatalf("unary RPCs Filter/Score/Reserve = %d/%d/%d, want none", filters, scores, reserves)
	}
	// The stuck stream was abandoned; the new one carries the three Reserves again.
	log := fake.waitSession(t, "the Reserves on a second stream", func(l []sessionMsg) bool {
		return len(l) > 0 && l[len(l)-1].stream == 2 && len(of(l, "reserve")) == sessionMaxOverdue
	})
	for i, r := range of(log, "reserve") {
		if r.stream != 2 || r.id != uint64(i+1) {
			t.Errorf("reserve %d = %v, want reserve#%d on stream 2", i, r, i+1)
		}
	}
}

func TestFailOpenOnDeadServer(t *testing.T) {
	// A loopback port with nothing listening: connection refused, through the real factory.
	tfw := newTestFramework(t, New, map[string]any{"endpoint": deadEndpoint(t), "timeout": "500ms"}, 4)
	before := counterValue(t, "Evaluate")
	res := tfw.runCycle(t, testPod())
	assertFailedOpen(t, tfw, res)
	if after := counterValue(t, "Evaluate"); after != before+1 {
		t.Fatalf("fail-open counter for Evaluate went %v -> %v, want +1", before, after)
	}
}

func TestFailClosedOnDeadServer(t *testing.T) {
	tfw := newTestFramework(t, New, map[string]any{"endpoint": deadEndpoint(t), "timeout": "500ms", "failOpen": false}, 3)
	res := tfw.runCycle(t, testPod())
	if res.preFilter.Code() != fwk.Error {
		t.Fatalf("PreFilter = %v, want Error (the pod is retried with backoff)", res.preFilter)
	}
}

func TestReserveAndUnreserve(t *testing.T) {
	fake := &fakeScorer{nodes: nodeNamesUpTo(10), score: scoreOf}
	var pl *Waterline
	tfw := newTestFramework(t, capturingFactory(serve(t, fake), &pl), fakeArgs(), 10)
	pod := testPod()
	res := tfw.runCycle(t, pod)

	// A later phase (Permit, PreBind, Bind) failed: the framework unreserves.
	tfw.fw.RunReservePluginsUnreserve(context.Background(), res.state, pod, res.node)

	log := fake.waitSession(t, "Reserve and Unreserve", func(l []sessionMsg) bool { return len(l) == 3 })
	if got := pl.roundTrips.Load(); got != 1 {
		t.Errorf("calls waited on = %d, want 1 (the Evaluate; Reserve and Unreserve are written)", got)
	}
	if _, _, reserves, unreserves := fake.calls(); reserves+unreserves != 0 {
		t.Errorf("unary Reserve/Unreserve RPCs = %d/%d, want none", reserves, unreserves)
	}
	r, u := log[1], log[2]
	if r.kind != "reserve" || u.kind != "unreserve" || r.id != 1 || u.id != 2 {
		t.Fatalf("session messages %v, want evaluate, reserve#1, unreserve#2", log)
	}
	for _, got := range []sessionMsg{r, u} {
		if got.node != nodeName(7) || got.pod.GetUid() != "uid-web-1" || got.pod.GetNamespace() != "shop" {
			t.Errorf("%s(node %s, pod %s in %s), want (%s, uid-web-1 in shop)", got.kind, got.node, got.pod.GetUid(), got.pod.GetNamespace(), nodeName(7))
		}
	}
	if r.pod.GetCpuRequestMillis() != 500 {
		t.Errorf("Reserve PodInfo cpu request = %d, want 500", r.pod.GetCpuRequestMillis())
	}
}

func TestDaemonSetPodsBypassFilter(t *testing.T) {
	hot := func(n string) string {
		if n == nodeName(1) {
			return "hot"
		}
		return ""
	}
	fake := &fakeScorer{nodes: nodeNamesUpTo(3), reject: hot, score: scoreOf}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 3)
	pod := testPod()
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-agent", UID: "ds-uid", Controller: ptr.To(true),
	}}

	res := tfw.runCycle(t, pod)

	if res.preFilter != nil || len(res.feasible) != 3 {
		t.Fatalf("DaemonSet pod: PreFilter %v, feasible %v; want every node feasible", res.preFilter, res.feasible)
	}
	// One Evaluate (it scores the pod too), its rejections ignored; a node it rejected has
	// no score in the answer and gets the lowest (a DaemonSet pod is pinned to one node by
	// its affinity, so in practice there is nothing to rank).
	for n, s := range res.scores {
		want := scoreOf(n) * testWeight
		if n == nodeName(1) {
			want = 0
		}
		if s != want {
			t.Errorf("DaemonSet pod: score of %s = %d, want %d", n, s, want)
		}
	}
	log := fake.waitSession(t, "the DaemonSet pod's Reserve", func(l []sessionMsg) bool { return len(of(l, "reserve")) == 1 })
	if evaluates := len(of(log, "evaluate")); evaluates != 1 {
		t.Errorf("Evaluates = %d for a DaemonSet pod, want 1", evaluates)
	}
	if r := of(log, "reserve")[0]; r.pod.GetOwnerKind() != "DaemonSet" {
		t.Errorf("DaemonSet pod must still be reserved in the ledger (got %v)", r)
	}

	// Against a scorer without Session, as before: no Filter RPC, still scored and reserved.
	fake = &fakeScorer{noSession: true, nodes: nodeNamesUpTo(3), reject: func(string) string { return "hot" }, score: scoreOf}
	tfw = newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 3)
	if res := tfw.runCycle(t, pod); res.preFilter != nil || len(res.feasible) != 3 {
		t.Fatalf("DaemonSet pod (unary): PreFilter %v, feasible %v; want every node feasible", res.preFilter, res.feasible)
	}
	filters, scores, reserves, _ := fake.calls()
	if filters != 0 || scores != 1 {
		t.Errorf("Filter/Score RPCs = %d/%d for a DaemonSet pod, want 0/1", filters, scores)
	}
	if reserves != 1 || fake.reserves[0].GetPod().GetOwnerKind() != "DaemonSet" {
		t.Errorf("DaemonSet pod must still be reserved in the ledger (got %d Reserve RPCs)", reserves)
	}
}

func TestNormalizeScoreClampsAndUnknownNodesAreNeutral(t *testing.T) {
	// node-002 is not in the scorer's table: it scores the answer's unknown_node_score.
	fake := &fakeScorer{nodes: nodeNamesUpTo(2), unknownScore: 42, score: func(n string) int64 {
		switch n {
		case nodeName(0):
			return 250
		case nodeName(1):
			return -3
		}
		return 42
	}}
	lis := serve(t, fake)
	tfw := newTestFramework(t, factoryFor(lis), fakeArgs(), 3)
	res := tfw.runCycle(t, testPod())
	want := map[string]int64{nodeName(0): 100 * testWeight, nodeName(1): 0, nodeName(2): 42 * testWeight}
	for n, w := range want {
		if res.scores[n] != w {
			t.Errorf("score of %s = %d, want %d", n, res.scores[n], w)
		}
	}

	if len(res.feasible) != 3 {
		t.Errorf("feasible = %v, want all 3 (a node outside the table is never rejected)", res.feasible)
	}

	// A node missing from a unary Score answer gets the neutral score, not zero.
	pl, err := newPlugin(context.Background(), rawArgs(t, fakeArgs()), bufconnDialer(lis))
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	state.Write(scoreStateKey, &scoreState{scores: map[string]int64{nodeName(0): 7}})
	ni, _ := tfw.snapshot.NodeInfos().Get(nodeName(2))
	if s, _ := pl.Score(context.Background(), state, testPod(), ni); s != NeutralScore {
		t.Errorf("score of unanswered node = %d, want %d", s, NeutralScore)
	}
}

// A scorer that predates scores_only answers name + score pairs; the plugin
// still gives each node its own score.
func TestScoresByNameFromAnOlderScorer(t *testing.T) {
	fake := &fakeScorer{score: scoreOf, namesOnly: true, noSession: true}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 12)
	res := tfw.runCycle(t, testPod())
	if len(res.scores) != 12 {
		t.Fatalf("scored %d nodes, want 12", len(res.scores))
	}
	for n, s := range res.scores {
		if want := scoreOf(n) * testWeight; s != want {
			t.Errorf("Waterline score of %s = %d, want %d", n, s, want)
		}
	}
	if res.node != nodeName(7) {
		t.Errorf("pod placed on %s, want the best-scored %s", res.node, nodeName(7))
	}
}

func TestNewRejectsBadArgs(t *testing.T) {
	for name, args := range map[string]map[string]any{
		"no endpoint":       {},
		"not host:port":     {"endpoint": "scorer"},
		"negative timeout":  {"endpoint": "127.0.0.1:1", "timeout": "-1s"},
		"cert without key":  {"endpoint": "127.0.0.1:1", "tls": map[string]any{"certFile": "/x.crt"}},
		"missing CA file":   {"endpoint": "127.0.0.1:1", "tls": map[string]any{"caFile": "/does/not/exist"}},
		"timeout not a dur": {"endpoint": "127.0.0.1:1", "timeout": 5},
		"session not bool":  {"endpoint": "127.0.0.1:1", "session": "no"},
		"policy not a name": {"endpoint": "127.0.0.1:1", "policy": "Batch_Jobs"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(context.Background(), rawArgs(t, args), nil); err == nil {
				t.Fatalf("New(%v) succeeded, want an error", args)
			}
		})
	}
}

// fakeArgs points the plugin at the bufconn fake, with a timeout that a loaded test machine
// cannot run into (the default 100 ms would turn a slow answer into a fail-open).
func fakeArgs() map[string]any {
	return map[string]any{"endpoint": "127.0.0.1:50051", "timeout": "10s"}
}

// deadEndpoint is a loopback port nothing listens on (tcpmux, port 1, is never served here);
// unlike a port freed after a bind, no parallel test can take it.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:1"
}

func counterValue(t *testing.T, rpc string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(failOpens.WithLabelValues(rpc))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// An overloaded large cluster rejects most nodes, and an Evaluate answer lists each with its
// reason (after a node table of every name): ~8 MiB here, twice grpc-go's default receive limit. The plugin must read it, not
// fail open exactly when the filter matters most.
func TestLargeFilterAnswerIsRead(t *testing.T) {
	const gone = 30000
	reason := strings.Repeat("cpu_usage_avg_5m 91.1% > 65%; ", 8) // ~250 bytes
	cluster := nodeNamesUpTo(3)
	for i := range gone {
		cluster = append(cluster, fmt.Sprintf("elsewhere-%05d", i))
	}
	fake := &fakeScorer{nodes: cluster, score: scoreOf, reject: func(n string) string {
		if n == nodeName(1) || strings.HasPrefix(n, "elsewhere-") {
			return reason
		}
		return ""
	}}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 3)
	before := counterValue(t, "Evaluate")

	res := tfw.runCycle(t, testPod())

	if res.preFilter != nil {
		t.Fatalf("PreFilter = %v, want success", res.preFilter)
	}
	if len(res.feasible) != 2 || slices.Contains(res.feasible, nodeName(1)) {
		t.Fatalf("feasible = %v, want node-000 and node-002", res.feasible)
	}
	if after := counterValue(t, "Evaluate"); after != before {
		t.Fatalf("fail-open counter moved %v -> %v: the large answer was not read", before, after)
	}
}

// TestProfilePolicyIsSentOnEveryCall: a profile's `policy` arg names the scorer policy on
// the Session's Evaluate and, without a Session, on the unary Filter and Score; a profile
// without one asks for the default (the empty name).
func TestProfilePolicyIsSentOnEveryCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  any // nil: the arg left out
		session bool
		want    string
	}{
		{"session with policy", "batch", true, "batch"},
		{"unary with policy", "batch", false, "batch"},
		{"session without policy", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeScorer{nodes: nodeNamesUpTo(4), score: scoreOf}
			args := fakeArgs()
			args["session"] = tc.session
			if tc.policy != nil {
				args["policy"] = tc.policy
			}
			tfw := newTestFramework(t, factoryFor(serve(t, fake)), args, 4)
			res := tfw.runCycle(t, testPod())
			if res.node == "" {
				t.Fatalf("pod not placed")
			}
			var asked []string
			fake.mu.Lock()
			for _, m := range fake.handled {
				if m.kind == "evaluate" {
					asked = append(asked, "Evaluate="+m.policy)
				}
			}
			for _, f := range fake.filters {
				asked = append(asked, "Filter="+f.GetPolicy())
			}
			for _, s := range fake.scores {
				asked = append(asked, "Score="+s.GetPolicy())
			}
			fake.mu.Unlock()
			want := []string{"Evaluate=" + tc.want}
			if !tc.session {
				want = []string{"Filter=" + tc.want, "Score=" + tc.want}
			}
			if !slices.Equal(asked, want) {
				t.Errorf("calls %v, want %v", asked, want)
			}
		})
	}
}
