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
// the collector's ledger equals the pods afterwards (ledgerMismatches); the fault was
// observed where it should be (a counter, a reconnect); after the fault is healed waterline
// decides again (probe pods, then a batch with no neutral answer and none on the hot node);
// and no waterline process panicked. A fault that leaves waterline deciding (the scorer
// still answers from its snapshot) also asserts that no pod of the burst went to the hot
// node, which only a neutral answer could choose.
//
// The stack (faultStackOptions): 6 nodes, node-5 at 90 % cpu (rejected by the 65 % filter),
// the others at 10-22 %, ledger on. Its collector reaches Prometheus and the API server
// through fault proxies (proxy_test.go), and the scheduler reaches the scorer through one
// (the plugin's endpoint; on the extender path the extender's --scorer-url). The collector
// runs with --prometheus-timeout 2s (the slow-Prometheus proxy adds 10 s, and the default
// 10 s timeout would race it) and --kube-watch-timeout 5s (a stranded watch is noticed after
// 10 s of silence instead of the default's 65 s).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
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

func faultStackOptions() stackOptions {
	return stackOptions{
		Nodes: faultNodes,
		CPUBusy: func(i int) float64 {
			if i == faultHot {
				return 0.9
			}
			return 0.10 + 0.03*float64(i)
		},
		MemoryUsed:  0.2,
		Policy:      policySpec{Metrics: []metricSpec{withFilter(cpuAvg5m, 65), withFilter(memAvg5m, 65)}, Ledger: true},
		WaitMetrics: true,
	}
}

// ---------------------------------------------------------------- process helpers

// setFlag sets flag's value in p's arguments (appending the flag when absent); it takes
// effect at p's next start.
func setFlag(p *proc, flag, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i+1 < len(p.args); i++ {
		if p.args[i] == flag {
			p.args[i+1] = value
			return
		}
	}
	p.args = append(p.args, flag, value)
}

// restart stops p (SIGTERM) and starts it again with its current arguments, failing t (the
// caller's test, which may be a subtest of the one that started p) if it cannot.
func restart(t *testing.T, p *proc) {
	t.Helper()
	p.Stop()
	if err := p.start(); err != nil {
		t.Fatalf("restart %s: %v", p.name, err)
	}
}

// checkNoPanic fails t if any process's log (every start of it: the log is appended to)
// says "panicked".
func checkNoPanic(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Errorf("%s log: %v", p.name, err)
			continue
		}
		if i := bytes.Index(b, []byte("panicked")); i >= 0 {
			lo, hi := max(0, i-300), min(len(b), i+700)
			t.Errorf("%s panicked:\n%s", p.name, b[lo:hi])
		}
	}
}

// keepLogs copies the processes' logs to tests/e2e/results/<prefix>-<name>.log (git-ignored),
// for reading what each process said about the faults.
func keepLogs(t *testing.T, prefix string, procs ...*proc) {
	for _, p := range procs {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			continue
		}
		writeResult(t, prefix+"-"+p.name+".log", string(b))
	}
}

// adminMetric sums the samples of metric name (the exposition name, e.g. with _total) on
// http://admin/metrics whose labels include every name=value pair of labels; 0 when none.
func adminMetric(admin, name string, labels ...string) (float64, error) {
	resp, err := httpc.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0.0
next:
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		series, value := line[:sp], line[sp+1:]
		metric, labelText := series, ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			metric, labelText = series[:i], series[i:]
		}
		if metric != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(labelText, labels[i]+`="`+labels[i+1]+`"`) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", admin, line, err)
		}
		total += v
	}
	return total, nil
}

// waitAdminMetric waits until metric (summed as adminMetric does) is want on every admin
// address, failing the stack's test if it never is.
func (s *stack) waitAdminMetric(metric string, want float64, admins ...string) {
	s.t.Helper()
	var last []float64
	err := waitFor(s.ctx, 60*time.Second, 200*time.Millisecond, fmt.Sprintf("%s = %g", metric, want), func() (bool, error) {
		last = last[:0]
		for _, admin := range admins {
			v, err := adminMetric(admin, metric)
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

// kubeconfigVia writes a copy of the kubeconfig src whose clusters point at server (a proxy
// in front of the API server: the serving certificate names 127.0.0.1, not a port).
func kubeconfigVia(t *testing.T, src, server string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-via-proxy")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---------------------------------------------------------------- pods and the ledger

// pacedPods creates n pods named prefix-i in ns, one every gap, in the background; the
// channel gets the outcome once all are created.
func (s *stack) pacedPods(ns, prefix string, n int, gap time.Duration) ([]string, <-chan error) {
	names := podNames(prefix, n)
	done := make(chan error, 1)
	go func() {
		for i, name := range names {
			if i > 0 {
				time.Sleep(gap)
			}
			if _, err := s.cluster.Client.CoreV1().Pods(ns).Create(s.ctx, newPod(ns, name), metav1.CreateOptions{}); err != nil {
				done <- fmt.Errorf("create %s/%s: %w", ns, name, err)
				return
			}
		}
		done <- nil
	}()
	return names, done
}

// boundCount counts the pods of ns with spec.nodeName set.
func (s *stack) boundCount(ns string) (int, error) {
	list, err := s.cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// ledgerCheck is the outcome of one comparison of the ledger with the pods.
type ledgerCheck struct {
	problems []string
	pods     int // bound pods compared
	// atScheduled: entries placed exactly at the PodScheduled second (learnt from the pod
	// watch); the others carry an earlier Reserve or provisional time.
	atScheduled int
}

// ledgerMismatches compares the collector's ledger (ListNodes, what it streams to the
// scorers) with the pods of the namespaces. Every bound pod must have one entry, on its
// node, placed between its creation and its bind. The API keeps both times to the second:
// creationTimestamp's second <= placed_at < the PodScheduled second + 1 s. A Reserve (or
// the extender's provisional guess) is stamped before the bind, with milliseconds; an entry
// only the watch saw is the PodScheduled time itself. The pod watch must have confirmed every
// entry (an unconfirmed Reserve or provisional guess expires). Every entry of those
// namespaces must be a bound pod, and no pod may have two.
func (s *stack) ledgerMismatches(namespaces ...string) (ledgerCheck, error) {
	var c ledgerCheck
	resp, err := s.listNodes()
	if err != nil {
		return c, err
	}
	ledger := map[string]*wlv1.LedgerEntry{}
	for _, e := range resp.GetLedger() {
		if prev := ledger[e.GetPodUid()]; prev != nil {
			c.problems = append(c.problems, fmt.Sprintf("%s/%s has two ledger entries (%s and %s)", e.GetNamespace(), e.GetName(), prev.GetNodeName(), e.GetNodeName()))
		}
		ledger[e.GetPodUid()] = e
	}
	inScope := map[string]bool{}
	bound := map[string]bool{}
	for _, ns := range namespaces {
		inScope[ns] = true
		list, err := s.cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return c, err
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			c.pods++
			uid := string(p.UID)
			bound[uid] = true
			var scheduled time.Time
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionTrue {
					scheduled = cond.LastTransitionTime.Time
				}
			}
			e := ledger[uid]
			switch {
			case e == nil:
				c.problems = append(c.problems, fmt.Sprintf("%s/%s (bound to %s) has no ledger entry", ns, p.Name, p.Spec.NodeName))
				continue
			case e.GetNodeName() != p.Spec.NodeName:
				c.problems = append(c.problems, fmt.Sprintf("%s/%s: ledger says %s, bound to %s", ns, p.Name, e.GetNodeName(), p.Spec.NodeName))
				continue
			case e.GetSource() != wlv1.LedgerSource_LEDGER_SOURCE_WATCH:
				// A Reserve or a provisional guess the pod watch never confirmed expires.
				c.problems = append(c.problems, fmt.Sprintf("%s/%s (bound to %s): the pod watch has not confirmed its entry (%v)", ns, p.Name, p.Spec.NodeName, e.GetSource()))
				continue
			case scheduled.IsZero():
				c.problems = append(c.problems, fmt.Sprintf("%s/%s is bound but has no PodScheduled=True condition", ns, p.Name))
				continue
			}
			at := e.GetPlacedAt().AsTime()
			created := p.CreationTimestamp.Time
			if at.Before(created) || !at.Before(scheduled.Add(time.Second)) {
				c.problems = append(c.problems, fmt.Sprintf("%s/%s: placed_at %s (%v) outside [created %s, PodScheduled %s + 1s)",
					ns, p.Name, at.Format(time.RFC3339Nano), e.GetSource(), created.Format(time.RFC3339), scheduled.Format(time.RFC3339)))
				continue
			}
			if at.Equal(scheduled) {
				c.atScheduled++
			}
		}
	}
	for uid, e := range ledger {
		if inScope[e.GetNamespace()] && !bound[uid] {
			c.problems = append(c.problems, fmt.Sprintf("ledger entry %s/%s on %s (%v) is not a bound pod", e.GetNamespace(), e.GetName(), e.GetNodeName(), e.GetSource()))
		}
	}
	sort.Strings(c.problems)
	return c, nil
}

// checkLedger waits (the pod watch and forwarded Reserves take a moment) until the ledger
// equals the pods of the namespaces, and fails t with the differences if it never does.
func (s *stack) checkLedger(t *testing.T, namespaces ...string) ledgerCheck {
	t.Helper()
	var last ledgerCheck
	err := waitFor(s.ctx, 30*time.Second, 300*time.Millisecond, "the ledger to equal the pods", func() (bool, error) {
		c, err := s.ledgerMismatches(namespaces...)
		last = c
		return err == nil && len(c.problems) == 0, err
	})
	if err != nil {
		t.Errorf("%v: %d bound pods, %d problem(s):\n  %s", err, last.pods, len(last.problems), strings.Join(last.problems, "\n  "))
	}
	return last
}

// ---------------------------------------------------------------- the shared stack

type faultStack struct {
	*stack
	path schedPath
	// promNet is in front of Prometheus (the collector's --prometheus-url), apiNet in front of the
	// API server (the collector's kubeconfig), scorerNet in front of the scorer's gRPC port
	// (the plugin's endpoint, or the extender's --scorer-url).
	promNet, apiNet, scorerNet *faultProxy
	hot                        string
	namespaces                 []string
}

// newFaultStack starts the stack of one path, rewires the collector and the scheduler's
// way to the scorer through fault proxies, and starts the scheduler.
func newFaultStack(ctx context.Context, t *testing.T, path schedPath) *faultStack {
	t.Helper()
	s := newStack(ctx, t, faultStackOptions())
	fs := &faultStack{stack: s, path: path, hot: nodeName(faultHot)}
	fs.promNet = startProxy(t, strings.TrimPrefix(s.promURL, "http://"))
	fs.apiNet = startProxy(t, strings.TrimPrefix(s.cluster.Server, "https://"))
	setFlag(s.collector, "--prometheus-url", "http://"+fs.promNet.Addr())
	setFlag(s.collector, "--prometheus-timeout", faultPromTimeout)
	// A silently lost watch is taken for dead after this + 5 s (the default is a minute).
	setFlag(s.collector, "--kube-watch-timeout", faultWatchTimeout)
	setFlag(s.collector, "--kubeconfig", kubeconfigVia(t, s.cluster.KubeconfigPath, "https://"+fs.apiNet.Addr()))
	restart(t, s.collector)
	waitReady(ctx, t, s.collector, s.collectorAdmin, 60*time.Second)

	fs.scorerNet = startProxy(t, s.scorerGRPC)
	spec := waterlineSched(s, path)
	if path == pluginPath {
		spec.Plugin.Endpoint = fs.scorerNet.Addr()
	} else {
		setFlag(s.extender, "--scorer-url", "http://"+fs.scorerNet.Addr())
		restart(t, s.extender)
		waitReady(ctx, t, s.extender, s.extenderAdmin, 60*time.Second)
	}
	s.waitMetrics(func(n string, m map[string]float64) bool {
		_, mem := m["mem_usage_avg_5m"]
		return mem && (n != fs.hot || m["cpu_usage_avg_5m"] > 65)
	}, "metrics through the Prometheus proxy, the hot node above the filter")
	s.startScheduler(spec)
	return fs
}

// forTest is fs with t as the test its helpers fail (a subtest of the one that built it).
func (fs *faultStack) forTest(t *testing.T) *faultStack {
	s := *fs.stack
	s.t = t
	c := *fs
	c.stack = &s
	return &c
}

// neutralAnswers counts the scheduler side's neutral answers: the plugin's fail-opens, or
// the extender's fallbacks.
func (fs *faultStack) neutralAnswers() float64 {
	if fs.path == pluginPath {
		return pluginFailOpens()
	}
	v, err := adminMetric(fs.extenderAdmin, "waterline_extender_fallbacks_total")
	if err != nil {
		fs.t.Fatalf("extender metrics: %v", err)
	}
	return v
}

// waitDecidingAgain, after a fault was healed: schedules probe pods (label probe=true,
// tiny request) one at a time until one is placed without a neutral answer (the plugin's
// and the extender's gRPC clients reconnect with backoff).
func (fs *faultStack) waitDecidingAgain(ns string) {
	fs.t.Helper()
	t0 := time.Now()
	for i := 0; ; i++ {
		if time.Since(t0) > 90*time.Second {
			fs.t.Fatalf("%s path still answers neutrally %v after the fault was healed", fs.path, time.Since(t0).Round(time.Second))
		}
		before := fs.neutralAnswers()
		name := fmt.Sprintf("probe-%d", i)
		fs.createPods([]*v1.Pod{newPod(ns, name, withLabels("probe", "true"), withCPU("10m", ""))}, 1)
		fs.waitScheduled(ns, []string{name}, time.Minute)
		if fs.neutralAnswers() == before {
			if i > 0 {
				fs.t.Logf("deciding again %v after the heal (%d probe pods)", time.Since(t0).Round(time.Millisecond), i+1)
			}
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (fs *faultStack) procs() []*proc { return []*proc{fs.collector, fs.scorer, fs.extender} }

// ---------------------------------------------------------------- the matrix

// faultCase is one row of the matrix.
type faultCase struct {
	name string
	// paths the fault runs on (nil: both); why says why a fault runs on one path only.
	paths []schedPath
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

// counterAbove returns an effect: metric on admin (labels as adminMetric) has risen above
// its value when the effect was built.
func counterAbove(admin, metric string, labels ...string) func() error {
	before, _ := adminMetric(admin, metric, labels...)
	return func() error {
		v, err := adminMetric(admin, metric, labels...)
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
		paths:    []schedPath{pluginPath},
		why:      "Prometheus is behind the collector: the scheduler's path only sees the snapshot, whose samples age the same way on both paths",
		deciding: true,
		inject: func(f *faultStack) {
			seen = counterAbove(f.collectorAdmin, "waterline_promql_failures_total", "metric", "cpu_usage_avg_5m")
			inject(f)
		},
		effect: func(*faultStack) error { return seen() },
		heal: func(f *faultStack) {
			heal(f)
			// Both metrics polled again.
			f.waitAdminMetric("waterline_metric_last_poll_failed", 0, f.collectorAdmin)
		},
	}
}

var faultCases = []faultCase{
	{
		name:     "policy-invalid",
		paths:    []schedPath{extenderPath},
		why:      "the collector, the scorer and the extender each reload the file on their own; on the extender path all three are in the scheduling path",
		deciding: true,
		inject: func(f *faultStack) {
			if err := os.WriteFile(f.policyPath, []byte(invalidPolicy), 0o644); err != nil {
				f.t.Fatal(err)
			}
		},
		effect: func(f *faultStack) error {
			for _, p := range []struct{ name, admin string }{{"collector", f.collectorAdmin}, {"scorer", f.scorerAdmin}, {"extender", f.extenderAdmin}} {
				errs, err := adminMetric(p.admin, "waterline_policy_reload_errors_total")
				if err != nil {
					return err
				}
				valid, err := adminMetric(p.admin, "waterline_policy_file_valid")
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
			f.writePolicy(f.opts.Policy)
			f.waitAdminMetric("waterline_policy_file_valid", 1, f.collectorAdmin, f.scorerAdmin, f.extenderAdmin)
		},
	},
	promFault("prometheus-killed",
		func(f *faultStack) { f.prom.Kill() },
		func(f *faultStack) {
			restart(f.t, f.prom)
			if err := waitFor(f.ctx, 60*time.Second, 200*time.Millisecond, "prometheus ready", func() (bool, error) { return httpOK(f.promURL + "/-/ready") }); err != nil {
				f.t.Fatal(err)
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
	watchFault("apiserver-watch-cut", nil, "", "cut", (*faultProxy).CutAll),
	watchFault("apiserver-watch-stranded", []schedPath{extenderPath},
		"the watch is the extender path's only confirmed ledger source (provisional guesses expire); "+
			"on the plugin path Reserves fill the ledger meanwhile, and the watch's recovery is the same code",
		"strand", (*faultProxy).StrandAll),
	func() faultCase {
		return faultCase{
			name:     "collector-kill-restart",
			deciding: true,
			inject:   func(f *faultStack) { f.collector.Kill() },
			effect: func(f *faultStack) error {
				if v, err := adminMetric(f.scorerAdmin, "waterline_collector_connected"); err != nil || v != 0 {
					return fmt.Errorf("scorer still streaming (%g, %v)", v, err)
				}
				return nil
			},
			heal: func(f *faultStack) {
				restart(f.t, f.collector)
				waitReady(f.ctx, f.t, f.collector, f.collectorAdmin, 60*time.Second)
				f.waitAdminMetric("waterline_collector_connected", 1, f.scorerAdmin)
			},
		}
	}(),
	neutralFault("scorer-kill-restart",
		func(f *faultStack) { f.scorer.Kill() },
		func(f *faultStack) {
			restart(f.t, f.scorer)
			waitReady(f.ctx, f.t, f.scorer, f.scorerAdmin, 60*time.Second)
		}),
	neutralFault("scheduler-scorer-black-hole",
		func(f *faultStack) { f.scorerNet.BlackHole() },
		func(f *faultStack) { f.scorerNet.Pass() }),
}

// watchFault: a fault done to the collector's connections to the API server (cut or
// strand them), seen once the collector opened a new one.
func watchFault(name string, paths []schedPath, why, verb string, do func(*faultProxy) int) faultCase {
	var accepted int64
	return faultCase{
		name: name, paths: paths, why: why,
		deciding: true,
		inject: func(f *faultStack) {
			accepted = f.apiNet.Accepted()
			if n := do(f.apiNet); n == 0 {
				f.t.Fatalf("no collector connection to the API server to %s", verb)
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

func (fc faultCase) runsOn(path schedPath) bool {
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
	f.ensureNamespace(ns)
	fs.namespaces = append(fs.namespaces, ns)
	neutral0 := f.neutralAnswers()

	names, created := f.pacedPods(ns, "burst", faultBurst, faultGap)
	f.waitScheduled(ns, names[:faultBeforeInject], time.Minute)
	atInject, err := f.boundCount(ns)
	if err != nil {
		t.Fatal(err)
	}
	fc.inject(f)
	injected := time.Now()
	// Hold the fault until it shows and faultUnderFault more pods were bound under it.
	seen := false
	var boundUnder int
	err = waitFor(f.ctx, faultEffectWindow, 100*time.Millisecond, fc.name+" seen and pods bound under it", func() (bool, error) {
		n, err := f.boundCount(ns)
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

	placed := f.waitScheduled(ns, names, 2*time.Minute)
	counts := f.countPerNode(placed)
	neutral := f.neutralAnswers() - neutral0
	t.Logf("%s: burst of %d placed: %s; neutral answers during it: %.0f", fc.name, len(names), fmtCounts(counts), neutral)
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
	after := podNames("after", faultAfterHeal)
	var pods []*v1.Pod
	for _, n := range after {
		pods = append(pods, newPod(ns, n))
	}
	f.createPods(pods, len(pods))
	afterCounts := f.countPerNode(f.waitScheduled(ns, after, time.Minute))
	if afterCounts[f.hot] > 0 || f.neutralAnswers() != neutral1 {
		t.Errorf("%s: after the heal %d pods on the hot node, %.0f neutral answers: %s", fc.name, afterCounts[f.hot], f.neutralAnswers()-neutral1, fmtCounts(afterCounts))
	}

	lc := f.checkLedger(t, ns)
	t.Logf("%s: ledger equals the %d bound pods (%d entries at their PodScheduled second, %d at a Reserve or provisional time before it); %v in all",
		fc.name, lc.pods, lc.atScheduled, lc.pods-lc.atScheduled, time.Since(t0).Round(time.Millisecond))
	checkNoPanic(t, f.procs()...)
}

// TestFaultMatrix: one shared stack per path (see the file comment).
func TestFaultMatrix(t *testing.T) { eachPath(t, testFaultMatrix) }

func testFaultMatrix(t *testing.T, path schedPath) {
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
	keepLogs(t, "faults-"+string(path), fs.procs()...)
	lc := fs.forTest(t).checkLedger(t, fs.namespaces...)
	t.Logf("%s path: ledger equals all %d bound pods of %d faults at the end; matrix %v", path, lc.pods, len(fs.namespaces), time.Since(t0).Round(time.Second))
}

// ---------------------------------------------------------------- two collectors

// streamingFrom is the collector URL of the scorer's last "streaming from the collector" log
// line after offset (bytes of its log), "" when there is none.
func streamingFrom(scorer *proc, offset int, urls ...string) string {
	b, _ := os.ReadFile(scorer.logPath)
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

func logSize(p *proc) int {
	st, err := os.Stat(p.logPath)
	if err != nil {
		return 0
	}
	return int(st.Size())
}

// expectedLedgerPercent is, per node, the ledger share the scorer should add for the
// entries of l (ListNodes): per policy metric, cpu_millis / 8 cores or memory_bytes / 32 GiB
// of every entry still counting toward it, in percent, summed over the metrics
// (scorerLedgerPercent's sum).
func expectedLedgerPercent(l map[string]*wlv1.LedgerEntry) map[string]float64 {
	out := map[string]float64{}
	for _, e := range l {
		for metric, left := range e.GetAbsorbRemainingByMetric() {
			if left.AsDuration() <= 0 {
				continue
			}
			switch metric {
			case cpuAvg5m.Name:
				out[e.GetNodeName()] += 100 * float64(e.GetCpuMillis()) / nodeCPUMillis
			case memAvg5m.Name:
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
func TestCollectorKillMidBurst(t *testing.T) { eachPath(t, testCollectorKillMidBurst) }

func testCollectorKillMidBurst(t *testing.T, path schedPath) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	t0 := time.Now()
	s := newStack(ctx, t, faultStackOptions())
	hot := nodeName(faultHot)

	bGRPC, bAdmin := freeAddr(t), freeAddr(t)
	args := append([]string(nil), s.collector.args...)
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--grpc-addr":
			args[i+1] = bGRPC
		case "--admin-addr":
			args[i+1] = bAdmin
		}
	}
	b := startProc(t, "collector-b", s.collector.path, args...)
	waitReady(ctx, t, b, bAdmin, 60*time.Second)
	aURL, bURL := "http://"+s.collectorGRPC, "http://"+bGRPC
	offset := logSize(s.scorer)
	setFlag(s.scorer, "--collector-url", aURL+","+bURL)
	restart(t, s.scorer)
	waitReady(ctx, t, s.scorer, s.scorerAdmin, 60*time.Second)
	var from string
	if err := waitFor(ctx, 30*time.Second, 100*time.Millisecond, "the scorer streaming", func() (bool, error) {
		from = streamingFrom(s.scorer, offset, aURL, bURL)
		return from != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	victim, survivor, survivorGRPC := s.collector, b, bGRPC
	if from == bURL {
		victim, survivor, survivorGRPC = b, s.collector, s.collectorGRPC
	}
	s.startScheduler(waterlineSched(s, path))
	t.Logf("two collectors, the scorer streams from %s (%v since start)", from, time.Since(t0).Round(time.Millisecond))

	ns := "ha"
	s.ensureNamespace(ns)
	names, created := s.pacedPods(ns, "burst", 20, 150*time.Millisecond)
	s.waitScheduled(ns, names[:5], time.Minute)
	offset = logSize(s.scorer)
	victim.Kill()
	killed := time.Now()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	counts := s.countPerNode(s.waitScheduled(ns, names, 2*time.Minute))
	n, _ := s.boundCount(ns)
	t.Logf("%s killed with 5 of 20 bound; all 20 placed %v later: %s", victim.name, time.Since(killed).Round(time.Millisecond), fmtCounts(counts))
	if counts[hot] > 0 {
		t.Errorf("%d pods on the hot node %s: the scorer should have kept deciding", counts[hot], hot)
	}
	if n != len(names) {
		t.Errorf("%d pods bound, want %d", n, len(names))
	}

	// The ledger the scorers see: the survivor's, over gRPC.
	conn, err := grpc.NewClient(survivorGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sv := *s
	sv.collectorClient = wlv1.NewCollectorServiceClient(conn)
	lc := sv.checkLedger(t, ns)
	t.Logf("the surviving collector's ledger equals the %d bound pods (%d at their PodScheduled second)", lc.pods, lc.atScheduled)

	// The scorer streams from the survivor and adds the same ledger share per node.
	var got, want map[string]float64
	err = waitFor(ctx, 30*time.Second, 200*time.Millisecond, "the scorer streaming from the survivor with its ledger", func() (bool, error) {
		if streamingFrom(s.scorer, offset, aURL, bURL) != "http://"+survivorGRPC {
			return false, fmt.Errorf("no failover to %s in the scorer's log yet", survivorGRPC)
		}
		l, err := sv.ledger()
		if err != nil {
			return false, err
		}
		want = expectedLedgerPercent(l)
		got, err = s.scorerLedgerPercent()
		if err != nil {
			return false, err
		}
		for _, node := range s.nodes {
			if math.Abs(got[node]-want[node]) > 1e-6 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("%v: scorer's ledger share %v, the survivor's entries give %v", err, got, want)
	}
	reconnects, _ := adminMetric(s.scorerAdmin, "waterline_collector_reconnects_total")
	t.Logf("the scorer failed over to %s (reconnects %g); ledger share per node %v; %v in all", survivor.name, reconnects, got, time.Since(t0).Round(time.Millisecond))
	keepLogs(t, "collector-kill-"+string(path), s.collector, b, s.scorer, s.extender)
	checkNoPanic(t, s.collector, b, s.scorer, s.extender)
}
