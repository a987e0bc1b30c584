package waterline

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// The scorer's anti-colocation reason for node-001: the pod's group already has shop/web-0
// there. node-002 is rejected for its load.
const (
	colocationReason = "anti-colocation app=web with shop/web-0"
	loadReason       = "cpu_usage_avg_5m predicted 99% > 65%"
)

func colocationScorer(nodes int, reasons map[string]string) *fakeScorer {
	return &fakeScorer{nodes: nodeNamesUpTo(nodes), score: scoreOf, reject: func(n string) string { return reasons[n] }}
}

func podInfo(t *testing.T, pod *v1.Pod) fwk.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

// An anti-colocation conflict is resolvable: evicting the other pod of the group removes
// it, so the node stays in the cycle and Filter answers Unschedulable (preemption may
// consider it), while a load rejection stays out of the cycle, which the framework marks
// UnschedulableAndUnresolvable (preemption cannot lower the measured load). In preemption's
// dry run, removing the conflicting pod makes the node pass; adding it back (a reprieve)
// rejects it again; removing any other pod changes nothing.
func TestAntiColocationIsResolvableByPreemption(t *testing.T) {
	fake := colocationScorer(4, map[string]string{nodeName(1): colocationReason, nodeName(2): loadReason})
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 4)
	pod := testPod()
	ctx := context.Background()

	state := framework.NewCycleState()
	preRes, s, _ := tfw.fw.RunPreFilterPlugins(ctx, state, pod)
	if !s.IsSuccess() {
		t.Fatalf("PreFilter = %v", s)
	}
	if preRes.AllNodes() || !preRes.NodeNames.Has(nodeName(1)) || preRes.NodeNames.Has(nodeName(2)) {
		t.Fatalf("PreFilter nodes = %v, want the anti-colocation node in and the hot node out", preRes)
	}
	peerNode, _ := tfw.snapshot.NodeInfos().Get(nodeName(1))
	s = tfw.fw.RunFilterPlugins(ctx, state, pod, peerNode)
	if s.Code() != fwk.Unschedulable || !strings.Contains(s.Message(), "anti-colocation app=web") {
		t.Fatalf("Filter on the anti-colocation node = %v, want Unschedulable naming the rule", s)
	}

	// Preemption's dry run on a clone of the cycle's state.
	dry := state.Clone()
	other := st.MakePod().Namespace("shop").Name("batch-3").UID("uid-batch-3").Obj()
	if s := tfw.fw.RunPreFilterExtensionRemovePod(ctx, dry, pod, podInfo(t, other), peerNode); !s.IsSuccess() {
		t.Fatalf("RemovePod = %v", s)
	}
	if s := tfw.fw.RunFilterPlugins(ctx, dry, pod, peerNode); s.Code() != fwk.Unschedulable {
		t.Fatalf("Filter after evicting an unrelated pod = %v, want still Unschedulable", s)
	}
	peer := st.MakePod().Namespace("shop").Name("web-0").UID("uid-web-0").Label("app", "web").Obj()
	if s := tfw.fw.RunPreFilterExtensionRemovePod(ctx, dry, pod, podInfo(t, peer), peerNode); !s.IsSuccess() {
		t.Fatalf("RemovePod = %v", s)
	}
	if s := tfw.fw.RunFilterPlugins(ctx, dry, pod, peerNode); !s.IsSuccess() {
		t.Fatalf("Filter with shop/web-0 evicted = %v, want success", s)
	}
	if s := tfw.fw.RunFilterPlugins(ctx, state, pod, peerNode); s.Code() != fwk.Unschedulable {
		t.Fatalf("the dry run leaked into the cycle's own state: Filter = %v", s)
	}
	if s := tfw.fw.RunPreFilterExtensionAddPod(ctx, dry, pod, podInfo(t, peer), peerNode); !s.IsSuccess() {
		t.Fatalf("AddPod = %v", s)
	}
	if s := tfw.fw.RunFilterPlugins(ctx, dry, pod, peerNode); s.Code() != fwk.Unschedulable {
		t.Fatalf("Filter with shop/web-0 back = %v, want Unschedulable", s)
	}
}

// When nothing passes but an anti-colocation node, PreFilter must not declare the pod
// unresolvable: the anti-colocation node goes on to Filter (Unschedulable, resolvable).
func TestOnlyAntiColocationLeftIsNotUnresolvable(t *testing.T) {
	fake := colocationScorer(2, map[string]string{nodeName(0): loadReason, nodeName(1): colocationReason})
	tfw := newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 2)
	res := tfw.runCycle(t, testPod())
	if res.preFilter != nil {
		t.Fatalf("PreFilter = %v, want success with the anti-colocation node left", res.preFilter)
	}
	if len(res.feasible) != 0 {
		t.Fatalf("feasible = %v, want none", res.feasible)
	}

	// Only load rejections: unresolvable, as before.
	fake = colocationScorer(2, map[string]string{nodeName(0): loadReason, nodeName(1): loadReason})
	tfw = newTestFramework(t, factoryFor(serve(t, fake)), fakeArgs(), 2)
	if res := tfw.runCycle(t, testPod()); res.preFilter.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter = %v, want UnschedulableAndUnresolvable", res.preFilter)
	}
}

func TestEvictionMayResolve(t *testing.T) {
	for reason, want := range map[string]bool{
		colocationReason:                       true,
		loadReason:                             false,
		"mem_usage_avg_5m has no fresh sample": false,
		colocationReason + "; " + loadReason:   false,
		"":                                     false,
		"anti-colocation a=b with ns/x; anti-colocation c=d with ns/y": true,
	} {
		if got := evictionMayResolve(reason); got != want {
			t.Errorf("evictionMayResolve(%q) = %v, want %v", reason, got, want)
		}
	}
}
