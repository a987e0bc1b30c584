package e2e

// TestMemoryBelowTarget: the end-to-end proof of the combination rule (docs/design.md#node-score),
// and the recordings the simulator's agreement test replays
// (sim/tests/agreement.rs, sim/testdata/agreement/).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/tests/e2e/stack"
)

// The burst of the weighted mean's weakness: 12 nodes (8 cpu, 32 Gi) at 20, 21.6 ... 38 % cpu and
// 10 % memory, the shipped policy (deploy/policy/policy.yaml: the six default metrics,
// water level 40, `combine: overshootDominates`), fed by a --static file (every metric of a
// resource at the node's level: the 1 h and 1 d maxima of a steady node equal its 5 m
// average, and a static file is the harness source that can feed all six). 30 pods of
// 500m cpu / 4 Gi memory (estimates 425m = 5.3 pp of cpu, 2.8 Gi = 8.75 pp of memory) are
// created at once. The cpu room below the target is Σ(40 − level) = 132 pp, 25 pods: the
// burst must go past the level somewhere, and the question is where.
//
//   - the new rule (an overshooting metric caps the node score): the pods water-fill cpu,
//     the hottest node that receives pods ends a pod or two above 40 %;
//   - the old rule (`combine: weightedMean`): each pod's memory (10 → 18.75 → 27.5 →
//     36.25 %, climbing the curve toward 100) outweighs the cpu it drives past 40, so every
//     node takes 3 pods whatever its cpu: the 36.4 % node ends at 52.3 % (> 50) and the 38 %
//     node may get none — the simulator's memory-below-target numbers, and what was measured
//     here by hand (README.md).
//
// Asserted: the hottest node that received pods (the higher of its cpu and memory) ends
// with predicted cpu and memory (observed + ledger, from the scorer's Score with explain)
// ≤ target + 10 pp, and no node's predicted value passes any metric's filterAbove.
const (
	btNodes  = 12
	btPods   = 30
	btMemPct = 10.0
	btCPU    = "500m"
	btMemory = "4Gi"
)

func btCPUPct(i int) float64 { return math.Round((20+18*float64(i)/11)*10) / 10 }

// shippedPolicy is deploy/policy/policy.yaml as the tests read it.
type shippedPolicy struct {
	Metrics []struct {
		Name        string  `json:"name"`
		Resource    string  `json:"resource"`
		Query       string  `json:"query"`
		Period      string  `json:"period"`
		Weight      float64 `json:"weight"`
		FilterAbove float64 `json:"filterAbove"`
	} `json:"metrics"`
	Curve struct {
		Kind   string  `json:"kind"`
		Target float64 `json:"target"`
	} `json:"curve"`
	Combine string `json:"combine"`
}

func readShippedPolicy(t *testing.T) (string, shippedPolicy) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(stack.RepoRoot(), "deploy", "policy", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p shippedPolicy
	if err := yaml.Unmarshal(text, &p); err != nil {
		t.Fatalf("deploy/policy/policy.yaml: %v", err)
	}
	if p.Curve.Kind != "waterLevel" || len(p.Metrics) == 0 {
		t.Fatalf("deploy/policy/policy.yaml: expected a waterLevel curve and metrics, got %+v", p)
	}
	return string(text), p
}

// oneMetricPolicy: the shipped policy with its metrics list replaced by cpu_usage_avg_5m
// alone (weight 1, its filter kept); curve, combine, ledger and extender as shipped.
func oneMetricPolicy(text string) string {
	var b strings.Builder
	inMetrics := false
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "metrics:"):
			inMetrics = true
			b.WriteString("metrics:\n  - {name: cpu_usage_avg_5m, resource: cpu, query: \"waterline:node_cpu_usage:avg5m\", period: 30s, weight: 1, filterAbove: 65}\n")
		case inMetrics && strings.HasPrefix(trimmed, "- "):
		default:
			inMetrics = false
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestMemoryBelowTarget(t *testing.T) { stack.EachPath(t, testMemoryBelowTarget) }

func testMemoryBelowTarget(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	policyText, pol := readShippedPolicy(t)
	if c := os.Getenv("WATERLINE_E2E_COMBINE"); c != "" {
		// By hand only: the old rule's numbers (README.md). The assertions are for the
		// shipped rule and are expected to fail with weightedMean.
		policyText = strings.Replace(policyText, "combine: "+pol.Combine, "combine: "+c, 1)
		if !strings.Contains(policyText, "combine: "+c) {
			policyText += "combine: " + c + "\n"
		}
		t.Logf("WATERLINE_E2E_COMBINE=%s: the policy's combination rule replaced", c)
	}

	static := filepath.Join(t.TempDir(), "static.yaml")
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := 0; i < btNodes; i++ {
		var ms []string
		for _, m := range pol.Metrics {
			v := btMemPct
			if m.Resource == "cpu" {
				v = btCPUPct(i)
			}
			ms = append(ms, fmt.Sprintf("%s: %g", m.Name, v))
		}
		fmt.Fprintf(&b, "  - {name: %s, capacity: {cpu: 8, memory: 32Gi}, metrics: {%s}}\n", stack.NodeName(i), strings.Join(ms, ", "))
	}
	if err := os.WriteFile(static, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	s := stack.New(ctx, t, stack.Options{Nodes: btNodes, StaticFile: static, Policy: stack.Policy{Raw: policyText}})
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch feeds the ledger")
	}
	probe := btProbe()
	observed := s.WaitScorerTerms(probe, len(pol.Metrics), "every node has every metric of the shipped policy")
	s.StartScheduler(s.WaterlineScheduler(path))
	t.Logf("stack ready in %v", time.Since(t0).Round(time.Millisecond))
	ns := "default"

	runs := recordRuns()
	rec := newRecording(path, "six metrics (deploy/policy/policy.yaml)", policyText, observed)
	for k := 0; k < runs; k++ {
		if k > 0 {
			s.DeletePods(ns, "burst")
			s.WaitScorerLedgerEmpty()
		}
		run := recordedBurst(s, ns, fmt.Sprintf("six-metrics-%d", k), btPods, probe)
		rec.Runs = append(rec.Runs, run)
		checkBelowTarget(t, path, pol, s.Nodes, run, rec.combine())
	}
	rec.write(t, "six-metrics-"+string(path))
	if recordDir() == "" {
		return
	}

	// The one-metric recording (cpu_usage_avg_5m alone) for sim/tests/agreement.rs: the
	// same bursts on the same stack after the pods are gone and the policy is reloaded
	// (collector and scorer poll the file every 2 s). Only when recording.
	one := oneMetricPolicy(policyText)
	s.DeletePods(ns, "burst")
	s.WaitScorerLedgerEmpty()
	s.WritePolicy(stack.Policy{Raw: one})
	observed1 := s.WaitScorerTerms(probe, 1, "the scorer runs the one-metric policy")
	rec1 := newRecording(path, "one metric (cpu_usage_avg_5m)", one, observed1)
	for k := 0; k < runs; k++ {
		if k > 0 {
			s.DeletePods(ns, "burst")
			s.WaitScorerLedgerEmpty()
		}
		run := recordedBurst(s, ns, fmt.Sprintf("one-metric-%d", k), btPods, probe)
		rec1.Runs = append(rec1.Runs, run)
		t.Logf("%s path, one metric, run %d: %s; watch lag median %.0f ms, cycle %.1f ms",
			path, k, stack.FmtCounts(run.Counts), run.Timing.WatchLagMs.Median, run.Timing.CycleMs)
	}
	rec1.write(t, "one-metric-"+string(path))
}

// checkBelowTarget asserts one burst of the shipped policy: the hottest node that received
// pods ends with predicted cpu and memory within target + 10 pp, and no node's predicted
// value passes a metric's filterAbove.
func checkBelowTarget(t *testing.T, path stack.Path, pol shippedPolicy, nodes []string, run *burstRun, combine string) {
	t.Helper()
	final, counts := run.final, run.Counts
	// The hottest node that received pods: the highest of its predicted cpu and memory.
	hot := ""
	for n, c := range counts {
		if c > 0 && (hot == "" || max(final[n].cpu, final[n].mem) > max(final[hot].cpu, final[hot].mem)) {
			hot = n
		}
	}
	maxMem := ""
	for n := range counts {
		if maxMem == "" || final[n].mem > final[maxMem].mem {
			maxMem = n
		}
	}
	target := pol.Curve.Target
	summary := fmt.Sprintf("%s path: %s; hottest node receiving pods %s: predicted cpu %.1f %%, memory %.1f %%; highest memory %s %.1f %%; "+
		"watch lag median %.0f ms, bind %.0f ms, cycle %.1f ms",
		path, stack.FmtCounts(counts), hot, final[hot].cpu, final[hot].mem, maxMem, final[maxMem].mem,
		run.Timing.WatchLagMs.Median, run.Timing.BindDelayMs, run.Timing.CycleMs)
	t.Log(summary)
	stack.AppendResult(t, "below-target.txt", fmt.Sprintf("%s %s (combine %s)\n", time.Now().UTC().Format(time.RFC3339), summary, combine))

	// Plugin path: Reserve in the scheduling cycle, so every pod is scored on a ledger
	// holding every earlier pod of the burst: the bound is target + 10 pp, as asked.
	//
	// Both paths, the same bound, judged by true load: the final prediction is read once the
	// scorer's ledger holds every pod of the burst on the node it was bound to (the watch has
	// caught up). On the extender path the protocol has no Reserve, so the extender makes one
	// at prioritize — a provisional Reserve of its best-scored node, singled out at the top
	// of its 0..10 answer so kube-scheduler's pick among equal totals follows it — in the
	// ledger the next pod is judged on, confirmed or moved when the bind shows in the watch
	// (counted: waterline_collector_provisional_guesses_total).
	if final[hot].cpu > target+10 || final[hot].mem > target+10 {
		t.Errorf("%s path: the hottest node receiving pods, %s, ends at predicted cpu %.1f %% / memory %.1f %% > target %g + 10 pp (%s)",
			path, hot, final[hot].cpu, final[hot].mem, target, stack.FmtCounts(counts))
	}
	for _, n := range nodes {
		for _, m := range pol.Metrics {
			if m.FilterAbove > 0 && run.predicted[n][m.Name] > m.FilterAbove {
				t.Errorf("%s path: %s ends with %s predicted at %.1f %%, past its filter threshold %g", path, n, m.Name, run.predicted[n][m.Name], m.FilterAbove)
			}
		}
	}
}

// recordRuns: bursts per policy and path, 1 unless recording (WATERLINE_E2E_RECORD_RUNS,
// default 5 when recording: the extender path's counts vary run to run, see
// sim/tests/agreement.rs).
func recordRuns() int {
	if recordDir() == "" {
		return 1
	}
	if n := stack.EnvInt("WATERLINE_E2E_RECORD_RUNS", 5); n > 0 {
		return n
	}
	return 5
}

// btProbe is a burst pod as the scorer sees it: its incoming_percent is the estimate
// one placement adds to the ledger.
func btProbe() *wlv1.PodInfo {
	cpu, mem := resource.MustParse(btCPU), resource.MustParse(btMemory)
	return &wlv1.PodInfo{Namespace: "default", Name: "bt-probe", Uid: "bt-probe",
		CpuRequestMillis: cpu.MilliValue(), MemoryRequestBytes: mem.Value()}
}

// ---------------------------------------------------------------- recording

// recording is one policy's bursts on one path, as sim/tests/agreement.rs replays them
// (its field names are that test's).
type recording struct {
	Comment    string         `json:"comment"`
	RecordedAt string         `json:"recorded_at"`
	Source     string         `json:"source"`
	Path       string         `json:"path"`
	Metrics    string         `json:"metrics"`
	Policy     string         `json:"policy"`
	Nodes      []recordedNode `json:"nodes"`
	Pods       []recordedPod  `json:"pods"`
	Runs       []*burstRun    `json:"runs"`
}

type recordedNode struct {
	Name     string             `json:"name"`
	CPU      string             `json:"cpu"`
	Memory   string             `json:"memory"`
	CPUPct   float64            `json:"cpu_pct"`
	MemPct   float64            `json:"memory_pct"`
	Observed map[string]float64 `json:"observed"`
}

type recordedPod struct {
	Name   string `json:"name"`
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
}

// burstRun is one burst: where its pods went and how fast things moved.
type burstRun struct {
	Counts map[string]int  `json:"counts"`
	Timing recordedTiming  `json:"timing"`
	Binds  []recordedBind  `json:"binds"`
	Final  []recordedFinal `json:"final"`

	final     map[string]cpuMem
	predicted map[string]map[string]float64
	share     map[string]float64 // metric -> one pod's estimate, percent of a node
}

type recordedBind struct {
	Pod     string `json:"pod"`
	Node    string `json:"node"`
	BoundMs int64  `json:"bound_ms"`
}

type lagStats struct {
	Median float64 `json:"median"`
	Mean   float64 `json:"mean"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

type recordedTiming struct {
	CreateMs     float64  `json:"create_ms"`
	BurstSeconds float64  `json:"burst_s"`
	CycleMs      float64  `json:"cycle_ms"`
	BindDelayMs  float64  `json:"bind_delay_ms"`
	WatchLagMs   lagStats `json:"watch_lag_ms"`
	SampleEvery  float64  `json:"sample_every_ms"`
}

type recordedFinal struct {
	Node      string  `json:"node"`
	CPUPct    float64 `json:"predicted_cpu_pct"`
	MemoryPct float64 `json:"predicted_memory_pct,omitempty"`
}

type cpuMem struct{ cpu, mem float64 }

const recordingComment = "Bursts on the real control plane (kube-apiserver, etcd, kube-scheduler) and the real waterline binaries, " +
	"recorded by tests/e2e TestMemoryBelowTarget and replayed by sim/tests/agreement.rs. nodes: levels as the scorer observed them (a --static file); " +
	"runs[].counts: pods bound per node; timing: create_ms = creating the burst, cycle_ms = mean interval between bindings, " +
	"bind_delay_ms = kube-scheduler's Bind extension point (mean), watch_lag_ms = from a binding seen by the test's pod watch to the first " +
	"scorer ledger sample holding it (Score explain every sample_every_ms, so it overstates by up to that; on the plugin path Reserve " +
	"comes before the binding); " +
	"final: predicted (observed + ledger) cpu and memory per node after the burst."

func (r *recording) combine() string {
	for _, l := range strings.Split(r.Policy, "\n") {
		if strings.HasPrefix(l, "combine:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "combine:"))
		}
	}
	return "(default)"
}

// recordDir: WATERLINE_E2E_RECORD=1 writes sim/testdata/agreement/, another value is a
// directory; unset: no recording.
func recordDir() string {
	switch v := os.Getenv("WATERLINE_E2E_RECORD"); v {
	case "":
		return ""
	case "1", "true":
		return filepath.Join(stack.RepoRoot(), "sim", "testdata", "agreement")
	default:
		return v
	}
}

func (r *recording) write(t *testing.T, name string) {
	text, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	stack.WriteResult(t, "below-target-"+name+".json", string(text)+"\n")
	dir := recordDir()
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, append(text, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", p)
}

func newRecording(path stack.Path, metrics, policy string, observed map[string]map[string]float64) *recording {
	r := &recording{
		Comment:    recordingComment,
		RecordedAt: time.Now().UTC().Format(time.RFC3339),
		Source:     fmt.Sprintf("tests/e2e TestMemoryBelowTarget/%s, WATERLINE_E2E_RECORD=1 tests/e2e/run.sh -run TestMemoryBelowTarget", path),
		Path:       string(path),
		Metrics:    metrics,
		Policy:     policy,
	}
	for i := 0; i < btNodes; i++ {
		n := stack.NodeName(i)
		rn := recordedNode{Name: n, CPU: "8", Memory: "32Gi", Observed: observed[n], CPUPct: observed[n]["cpu_usage_avg_5m"], MemPct: btMemPct}
		if v, ok := observed[n]["mem_usage_avg_5m"]; ok {
			rn.MemPct = v
		}
		r.Nodes = append(r.Nodes, rn)
	}
	for _, name := range stack.PodNames("burst", btPods) {
		r.Pods = append(r.Pods, recordedPod{Name: name, CPU: btCPU, Memory: btMemory})
	}
	return r
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

type ledgerSample struct {
	at    time.Time
	count map[string]int
	total int
}

// recordedBurst creates n pods (500m / 4Gi) at once and measures: bindings as a pod watch
// sees them, the scorer's ledger (Score explain every ~20 ms) until it holds every pod,
// and at the end each node's predicted cpu and memory (observed + ledger).
func recordedBurst(s *stack.Stack, ns, prefix string, n int, probe *wlv1.PodInfo) *burstRun {
	s.T().Helper()
	r := &burstRun{share: map[string]float64{}}
	terms, err := s.ScorerTerms(probe)
	if err != nil {
		s.T().Fatal(err)
	}
	for _, term := range terms[s.Nodes[0]] {
		r.share[term.GetMetric()] = term.GetIncomingPercent()
	}
	cpuShare := r.share["cpu_usage_avg_5m"]
	if cpuShare <= 0 {
		s.T().Fatalf("the scorer explains no cpu_usage_avg_5m incoming share for %s/%s: %v", btCPU, btMemory, terms[s.Nodes[0]])
	}
	countOf := func(terms map[string]map[string]*wlv1.ScoreTerm) (map[string]int, int) {
		c, total := map[string]int{}, 0
		for node, ms := range terms {
			c[node] = int(math.Round(ms["cpu_usage_avg_5m"].GetLedgerPercent() / cpuShare))
			total += c[node]
		}
		return c, total
	}

	w, err := s.Cluster.Client.CoreV1().Pods(ns).Watch(s.Ctx(), metav1.ListOptions{LabelSelector: "burst=" + prefix})
	if err != nil {
		s.T().Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	bindAt, bindNode := map[string]time.Time{}, map[string]string{}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, seen := bindAt[p.Name]; !seen {
				bindAt[p.Name], bindNode[p.Name] = now, p.Spec.NodeName
			}
			mu.Unlock()
		}
	}()
	stop := make(chan struct{})
	samplesDone := make(chan []ledgerSample)
	go func() {
		var out []ledgerSample
		for {
			select {
			case <-stop:
				samplesDone <- out
				return
			default:
			}
			if t, err := s.ScorerTerms(probe); err == nil {
				c, total := countOf(t)
				out = append(out, ledgerSample{at: time.Now(), count: c, total: total})
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	bind0 := stack.Histograms(stack.Legacy, "scheduler_framework_extension_point_duration_seconds", "extension_point")["Bind"]
	names := stack.PodNames(prefix, n)
	pods := make([]*v1.Pod, n)
	for i, name := range names {
		pods[i] = stack.NewPod(ns, name, stack.WithLabels("burst", prefix), stack.WithCPU(btCPU, ""), stack.WithMemory(btMemory))
	}
	created := time.Now()
	s.CreatePods(pods, n)
	createMs := ms(time.Since(created))
	placed := s.WaitScheduled(ns, names, 3*time.Minute)
	r.Counts = s.CountPerNode(placed)
	// Until the scorer's ledger holds the whole burst.
	err = stack.WaitFor(s.Ctx(), 60*time.Second, 50*time.Millisecond, "the scorer's ledger holds the burst", func() (bool, error) {
		t, err := s.ScorerTerms(probe)
		if err != nil {
			return false, err
		}
		c, _ := countOf(t)
		for node, want := range r.Counts {
			if c[node] != want {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.T().Fatalf("%v (counts %s)", err, stack.FmtCounts(r.Counts))
	}
	close(stop)
	samples := <-samplesDone
	bind1 := stack.Histograms(stack.Legacy, "scheduler_framework_extension_point_duration_seconds", "extension_point")["Bind"]

	// Final prediction.
	final, err := s.ScorerTerms(probe)
	if err != nil {
		s.T().Fatal(err)
	}
	r.final = map[string]cpuMem{}
	r.predicted = map[string]map[string]float64{}
	for _, node := range s.Nodes {
		r.predicted[node] = map[string]float64{}
		cm := cpuMem{}
		for m, term := range final[node] {
			v := term.GetObservedPercent() + term.GetLedgerPercent()
			r.predicted[node][m] = v
			if strings.HasPrefix(m, "cpu") {
				cm.cpu = math.Max(cm.cpu, v)
			} else if strings.HasPrefix(m, "mem") {
				cm.mem = math.Max(cm.mem, v)
			}
		}
		r.final[node] = cm
		r.Final = append(r.Final, recordedFinal{Node: node, CPUPct: round1(cm.cpu), MemoryPct: round1(cm.mem)})
	}

	// Timing.
	mu.Lock()
	defer mu.Unlock()
	type bind struct {
		at   time.Time
		node string
	}
	var binds []bind
	for name, at := range bindAt {
		binds = append(binds, bind{at, bindNode[name]})
		r.Binds = append(r.Binds, recordedBind{Pod: name, Node: bindNode[name], BoundMs: ms(at.Sub(created)).round()})
	}
	sort.Slice(r.Binds, func(i, j int) bool { return r.Binds[i].BoundMs < r.Binds[j].BoundMs })
	sort.Slice(binds, func(i, j int) bool { return binds[i].at.Before(binds[j].at) })
	r.Timing.CreateMs = round1(float64(createMs))
	if len(binds) > 1 {
		r.Timing.CycleMs = round1(float64(ms(binds[len(binds)-1].at.Sub(binds[0].at))) / float64(len(binds)-1))
		r.Timing.BurstSeconds = math.Round(binds[len(binds)-1].at.Sub(created).Seconds()*100) / 100
	}
	if d := bind1[1] - bind0[1]; d > 0 {
		r.Timing.BindDelayMs = round1(1000 * (bind1[0] - bind0[0]) / d)
	}
	// Per node, the k-th binding against the first sample whose ledger holds k pods there.
	perNode := map[string][]time.Time{}
	for _, b := range binds {
		perNode[b.node] = append(perNode[b.node], b.at)
	}
	var lags []float64
	for node, ts := range perNode {
		for k, bt := range ts {
			for _, smp := range samples {
				if smp.count[node] >= k+1 {
					lags = append(lags, float64(ms(smp.at.Sub(bt))))
					break
				}
			}
		}
	}
	r.Timing.WatchLagMs = stats(lags)
	if len(samples) > 1 {
		r.Timing.SampleEvery = round1(float64(ms(samples[len(samples)-1].at.Sub(samples[0].at))) / float64(len(samples)-1))
	}
	return r
}

type millis float64

func ms(d time.Duration) millis { return millis(float64(d.Microseconds()) / 1000) }

func (m millis) round() int64 { return int64(math.Round(float64(m))) }

func stats(v []float64) lagStats {
	if len(v) == 0 {
		return lagStats{}
	}
	sort.Float64s(v)
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return lagStats{Median: round1(med), Mean: round1(sum / float64(len(v))), Min: round1(v[0]), Max: round1(v[len(v)-1]), N: len(v)}
}
