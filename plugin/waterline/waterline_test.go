package waterline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestOneFilterAndOneScoreRPCPerCycle(t *testing.T) {
	for _, nodeCount := range []int{3, 500} {
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
			tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), nodeCount)
			pod := testPod()

			res := tfw.runCycle(t, pod)

			filters, scores, reserves, unreserves := fake.calls()
			if filters != 1 || scores != 1 || reserves != 1 || unreserves != 0 {
				t.Fatalf("RPCs Filter/Score/Reserve/Unreserve = %d/%d/%d/%d, want 1/1/1/0", filters, scores, reserves, unreserves)
			}
			if f := fake.filters[0]; !f.GetAllNodes() || len(f.GetNodeNames()) != 0 {
				t.Errorf("Filter RPC all_nodes=%v with %d names, want all_nodes and no names", f.GetAllNodes(), len(f.GetNodeNames()))
			}
			wantFeasible := nodeCount - 1
			if nodeCount > 400 {
				wantFeasible--
			}
			if !fake.scores[0].GetScoresOnly() {
				t.Errorf("Score RPC without scores_only: the answer would echo every name")
			}
			if got := len(fake.scores[0].GetNodeNames()); got != wantFeasible {
				t.Errorf("Score RPC carried %d nodes, want the %d feasible ones", got, wantFeasible)
			}
			for _, n := range fake.scores[0].GetNodeNames() {
				if n == nodeName(1) {
					t.Errorf("rejected node %s was sent to Score", n)
				}
			}
			// Score hands back exactly the RPC's score per node (times the profile weight).
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
			// Reserve carries the pod and the chosen node.
			r := fake.reserves[0]
			if r.GetNodeName() != res.node || r.GetPod().GetUid() != "uid-web-1" || r.GetPod().GetName() != "web-1" {
				t.Errorf("Reserve(%s, %s/%s), want (%s, uid-web-1/web-1)", r.GetNodeName(), r.GetPod().GetUid(), r.GetPod().GetName(), res.node)
			}
			if p := fake.filters[0].GetPod(); p.GetCpuRequestMillis() != 500 || p.GetMemoryRequestBytes() != 1<<30 || p.GetLabels()["app"] != "web" || p.GetSchedulerName() != "waterline-scheduler" {
				t.Errorf("Filter RPC PodInfo = %v", p)
			}
		})
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
	if filters, _, _, _ := fake.calls(); filters != 1 {
		t.Fatalf("Filter RPCs = %d, want 1 (Filter must read CycleState, not call out)", filters)
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
	if _, scores, reserves, _ := fake.calls(); scores != 0 || reserves != 0 {
		t.Fatalf("Score/Reserve RPCs = %d/%d after a rejection, want 0/0", scores, reserves)
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

func TestFailOpenOnTimeout(t *testing.T) {
	fake := &fakeScorer{
		delay:  10 * time.Second, // far beyond the plugin's timeout; the deadline cancels it
		nodes:  nodeNamesUpTo(5),
		reject: func(string) string { return "never seen" },
		score:  scoreOf,
	}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), map[string]any{"endpoint": "127.0.0.1:50051", "timeout": "300ms"}, 5)
	before := counterValue(t, "Filter")

	start := time.Now()
	res := tfw.runCycle(t, testPod())
	elapsed := time.Since(start)

	assertFailedOpen(t, tfw, res)
	if filters, scores, reserves, _ := fake.calls(); filters != 1 || scores != 1 || reserves != 1 {
		t.Fatalf("RPCs Filter/Score/Reserve = %d/%d/%d, want one attempt each", filters, scores, reserves)
	}
	// Three RPCs held 10 s each by the fake would take 30 s.
	if elapsed > 5*time.Second {
		t.Fatalf("cycle took %v; the 300ms timeout was not applied", elapsed)
	}
	if after := counterValue(t, "Filter"); after != before+1 {
		t.Fatalf("fail-open counter for Filter went %v -> %v, want +1", before, after)
	}
}

func TestFailOpenOnDeadServer(t *testing.T) {
	// A loopback port with nothing listening: connection refused, through the real factory.
	tfw := newTestFramework(t, New, map[string]any{"endpoint": deadEndpoint(t), "timeout": "500ms"}, 4)
	before := counterValue(t, "Score")
	res := tfw.runCycle(t, testPod())
	assertFailedOpen(t, tfw, res)
	if after := counterValue(t, "Score"); after != before+1 {
		t.Fatalf("fail-open counter for Score went %v -> %v, want +1", before, after)
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
	fake := &fakeScorer{score: scoreOf}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 10)
	pod := testPod()
	res := tfw.runCycle(t, pod)

	// A later phase (Permit, PreBind, Bind) failed: the framework unreserves.
	tfw.fw.RunReservePluginsUnreserve(context.Background(), res.state, pod, res.node)

	_, _, reserves, unreserves := fake.calls()
	if reserves != 1 || unreserves != 1 {
		t.Fatalf("Reserve/Unreserve RPCs = %d/%d, want 1/1", reserves, unreserves)
	}
	r, u := fake.reserves[0], fake.unreserve[0]
	for _, got := range []struct {
		rpc, node, uid, ns string
	}{
		{"Reserve", r.GetNodeName(), r.GetPod().GetUid(), r.GetPod().GetNamespace()},
		{"Unreserve", u.GetNodeName(), u.GetPod().GetUid(), u.GetPod().GetNamespace()},
	} {
		if got.node != nodeName(7) || got.uid != "uid-web-1" || got.ns != "shop" {
			t.Errorf("%s(node %s, pod %s in %s), want (%s, uid-web-1 in shop)", got.rpc, got.node, got.uid, got.ns, nodeName(7))
		}
	}
	if r.GetPod().GetCpuRequestMillis() != 500 {
		t.Errorf("Reserve PodInfo cpu request = %d, want 500", r.GetPod().GetCpuRequestMillis())
	}
}

func TestDaemonSetPodsBypassFilter(t *testing.T) {
	fake := &fakeScorer{nodes: nodeNamesUpTo(3), reject: func(string) string { return "hot" }, score: scoreOf}
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 3)
	pod := testPod()
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-agent", UID: "ds-uid", Controller: ptr.To(true),
	}}

	res := tfw.runCycle(t, pod)

	if res.preFilter != nil || len(res.feasible) != 3 {
		t.Fatalf("DaemonSet pod: PreFilter %v, feasible %v; want every node feasible", res.preFilter, res.feasible)
	}
	filters, _, reserves, _ := fake.calls()
	if filters != 0 {
		t.Errorf("Filter RPCs = %d for a DaemonSet pod, want 0", filters)
	}
	if reserves != 1 || fake.reserves[0].GetPod().GetOwnerKind() != "DaemonSet" {
		t.Errorf("DaemonSet pod must still be reserved in the ledger (got %d Reserve RPCs)", reserves)
	}
}

func TestNormalizeScoreClampsAndUnknownNodesAreNeutral(t *testing.T) {
	fake := &fakeScorer{score: func(n string) int64 {
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

	// A node missing from the Score answer gets the neutral score, not zero.
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
	fake := &fakeScorer{score: scoreOf, namesOnly: true}
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

// An overloaded large cluster rejects most nodes, and an all_nodes answer lists each with its
// reason: ~9 MiB here, twice grpc-go's default receive limit. The plugin must read it, not
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
	before := counterValue(t, "Filter")

	res := tfw.runCycle(t, testPod())

	if res.preFilter != nil {
		t.Fatalf("PreFilter = %v, want success", res.preFilter)
	}
	if len(res.feasible) != 2 || slices.Contains(res.feasible, nodeName(1)) {
		t.Fatalf("feasible = %v, want node-000 and node-002", res.feasible)
	}
	if after := counterValue(t, "Filter"); after != before {
		t.Fatalf("fail-open counter moved %v -> %v: the large answer was not read", before, after)
	}
}
