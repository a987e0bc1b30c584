// Package stack runs the waterline stack of the end-to-end tests: a control plane from
// harness (etcd, kube-apiserver, an in-process kube-scheduler), fake nodes, the fake
// exporter (fakeexporter), a real Prometheus, and the real Rust binaries
// (waterline-collector, waterline-scorer, waterline-extender) as child processes on free
// loopback ports. kube-scheduler runs with a profile `waterline-scheduler` that calls the
// extender, or enables the Waterline framework plugin (plugin/waterline, registered with
// app.WithPlugin) that calls the scorer over gRPC.
//
// Besides starting things, it holds what several tests read: pods (pods.go), the
// collector's and the scorer's state (state.go), the processes' /metrics parsed with
// expfmt (metrics.go), a TCP fault proxy (proxy.go) and a kube-scheduler in a process
// of its own (schedproc.go). Every helper fails the test it was given (Stack.ForTest).
package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/tests/e2e/fakeexporter"
	"github.com/waterline/waterline/tests/e2e/harness"
)

// Options say what New starts.
type Options struct {
	Nodes      int
	NodeCPU    string // allocatable cpu of the fake nodes (default "8")
	CPUBusy    func(i int) float64
	MemoryUsed float64
	Policy     Policy
	// StaticFile: no exporter or Prometheus; the collector reads this --static file.
	StaticFile string
	// MetricsServer: no exporter or Prometheus; a fake metrics-server (CPUBusy and
	// MemoryUsed of each node) behind the control plane's aggregation layer, and the
	// collector without a Prometheus URL, so it picks metrics-server by itself.
	MetricsServer bool
	// Sched: start the in-process scheduler with this config.
	Sched *SchedulerSpec
	// WaitMetrics: wait until the collector holds a sample of every policy
	// metric for every node (Prometheus mode).
	WaitMetrics bool
	// ExtenderArgs: extra flags for waterline-extender.
	ExtenderArgs []string
	// CollectorArgs: extra flags for waterline-collector.
	CollectorArgs []string
	// ScorerArgs: extra flags for waterline-scorer (e.g. `--policy NAME=PATH`).
	ScorerArgs []string
}

// Service is one waterline process of the stack and its two listeners.
type Service struct {
	*Proc
	// Addr is the gRPC listener (collector, scorer) or the HTTP verbs' (extender).
	Addr string
	// Admin serves /metrics, /live and /ready.
	Admin string
}

// WaitReady waits up to a minute for the service's /ready.
func (sv Service) WaitReady(ctx context.Context, t testing.TB) {
	t.Helper()
	WaitReady(ctx, t, sv.Proc, sv.Admin, 60*time.Second)
}

// RestartReady restarts the service with its current flags and waits for /ready.
func (sv Service) RestartReady(ctx context.Context, t testing.TB) {
	t.Helper()
	sv.Restart(t)
	sv.WaitReady(ctx, t)
}

// ExtenderURL is an extender's URL prefix for the scheduler config.
func (sv Service) ExtenderURL() string { return "http://" + sv.Addr + "/waterline/v1" }

// Stack is a running stack. Every process stops at the cleanup of the test that built it.
type Stack struct {
	t   testing.TB
	ctx context.Context

	Cluster *harness.Cluster
	// Nodes are the fake nodes' names, NodeName(0) onwards.
	Nodes []string
	// Exporter and Prometheus are nil with Options.StaticFile.
	Exporter      *fakeexporter.Exporter
	Prometheus    *Proc
	PrometheusURL string
	// MetricsServer is set with Options.MetricsServer.
	MetricsServer *MetricsServer

	PolicyPath string
	Opts       Options

	Collector, Scorer, Extender Service
	// KubeWatch: the collector runs with --kubeconfig (pod and node watch).
	KubeWatch       bool
	CollectorClient wlv1.CollectorServiceClient
	ScorerClient    wlv1.ScorerServiceClient

	stopSched func()
}

// T is the test the stack's helpers fail.
func (s *Stack) T() testing.TB { return s.t }

// Ctx bounds every call the stack's helpers make.
func (s *Stack) Ctx() context.Context { return s.ctx }

// ForTest is a copy of s whose helpers fail t (a subtest of the test that built s); the
// processes and clients are shared.
func (s *Stack) ForTest(t testing.TB) *Stack {
	c := *s
	c.t = t
	return &c
}

// ControlPlane starts a control plane (no scheduler yet) and nodes fake nodes of nodeCPU
// cores and 32 GiB: the start of every stack, and all a test that starts its own
// waterline processes needs. The control plane stops at t's cleanup.
func ControlPlane(ctx context.Context, t testing.TB, nodes int, nodeCPU string) *Stack {
	t.Helper()
	s := &Stack{t: t, ctx: ctx}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	t0 := time.Now()
	c, err := harness.Start(ctx, t, harness.Options{KubeconfigPath: kubeconfig})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	s.Cluster = c
	t.Cleanup(func() {
		s.StopScheduler()
		c.Stop()
	})
	s.Nodes, err = harness.CreateFakeNodes(ctx, c.Client, harness.NodeSpec{
		Count: nodes, CPU: nodeCPU, Memory: "32Gi", IPPrefix: IPPrefix(nodes), Parallelism: 32,
	})
	if err != nil {
		t.Fatalf("fake nodes: %v", err)
	}
	t.Logf("stack: control plane + %d nodes in %v", nodes, time.Since(t0).Round(time.Millisecond))
	return s
}

// New starts the whole stack: the control plane and fake nodes, the exporter and
// Prometheus (unless o.StaticFile), the collector, the scorer and the extender, and the
// scheduler when o.Sched is set.
func New(ctx context.Context, t testing.TB, o Options) *Stack {
	t.Helper()
	for _, b := range []string{"waterline-collector", "waterline-scorer", "waterline-extender"} {
		NeedBinary(t, b)
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "8"
	}
	t0 := time.Now()
	s := ControlPlane(ctx, t, o.Nodes, o.NodeCPU)
	s.Opts = o
	dir := t.TempDir()

	var err error
	cores, _ := strconv.Atoi(o.NodeCPU)
	if o.MetricsServer {
		var mns []MetricsNode
		for i := 0; i < o.Nodes; i++ {
			busy := 0.2
			if o.CPUBusy != nil {
				busy = o.CPUBusy(i)
			}
			mns = append(mns, MetricsNode{Name: NodeName(i), CPUMillis: int64(busy * float64(cores) * 1000), MemoryBytes: int64(o.MemoryUsed * float64(32<<30))})
		}
		s.MetricsServer = StartMetricsServer(t, mns)
		s.MetricsServer.Register(ctx, t, s.Cluster)
	} else if o.StaticFile == "" {
		var fns []fakeexporter.Node
		for i := 0; i < o.Nodes; i++ {
			ip, _ := harness.NodeIP(IPPrefix(o.Nodes), i)
			busy := 0.2
			if o.CPUBusy != nil {
				busy = o.CPUBusy(i)
			}
			fns = append(fns, fakeexporter.Node{Name: NodeName(i), Instance: ip + ":9100", Cores: cores, MemoryBytes: 32 << 30, CPUBusy: busy, MemoryUsed: o.MemoryUsed})
		}
		s.Exporter, err = fakeexporter.Start(fns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Exporter.Close)
		s.Prometheus, s.PrometheusURL = StartPrometheus(ctx, t, s.Exporter.ScrapeConfigs(), "1s")
	}

	s.PolicyPath = filepath.Join(dir, "policy.yaml")
	s.WritePolicy(o.Policy)

	s.Collector = Service{Addr: FreeAddr(t), Admin: FreeAddr(t)}
	cargs := []string{"--grpc-addr", s.Collector.Addr, "--admin-addr", s.Collector.Admin, "--policy", s.PolicyPath}
	if o.StaticFile != "" {
		cargs = append(cargs, "--static", o.StaticFile)
	} else if o.MetricsServer {
		// No --prometheus-url: the collector finds metrics.k8s.io and reads it (every
		// second, as the scenarios' Prometheus is scraped).
		cargs = append(cargs, "--metrics-server-period", "1s")
	} else {
		cargs = append(cargs, "--prometheus-url", s.PrometheusURL)
	}
	if binaryHasFlag(t, "waterline-collector", "--kubeconfig") {
		s.KubeWatch = true
		cargs = append(cargs, "--kubeconfig", s.Cluster.KubeconfigPath)
	} else {
		t.Logf("BLOCKED(partly): waterline-collector has no --kubeconfig yet: no pod watch (ledger only from Reserve) and no node watch; mapping instance IPs with --node-map")
		nm := filepath.Join(dir, "node-map.yaml")
		var b strings.Builder
		b.WriteString("nodes:\n")
		for i := 0; i < o.Nodes; i++ {
			ip, _ := harness.NodeIP(IPPrefix(o.Nodes), i)
			fmt.Fprintf(&b, "  - {name: %s, addresses: [%s]}\n", NodeName(i), ip)
		}
		if err := os.WriteFile(nm, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		cargs = append(cargs, "--node-map", nm)
	}
	cargs = append(cargs, o.CollectorArgs...)
	s.Collector.Proc = StartProc(t, "collector", NeedBinary(t, "waterline-collector"), cargs...)
	s.Collector.WaitReady(ctx, t)
	s.CollectorClient = wlv1.NewCollectorServiceClient(s.dial(s.Collector.Addr))

	s.Scorer = Service{Addr: FreeAddr(t), Admin: FreeAddr(t)}
	sargs := []string{"--grpc-addr", s.Scorer.Addr, "--admin-addr", s.Scorer.Admin,
		"--collector-url", "http://" + s.Collector.Addr, "--policy", s.PolicyPath}
	s.Scorer.Proc = StartProc(t, "scorer", NeedBinary(t, "waterline-scorer"), append(sargs, o.ScorerArgs...)...)
	s.Scorer.WaitReady(ctx, t)
	s.ScorerClient = wlv1.NewScorerServiceClient(s.dial(s.Scorer.Addr))

	s.Extender = s.StartExtender("extender", o.ExtenderArgs...)
	t.Logf("stack: prometheus %s, collector %s, scorer %s, extender %s (%v since start)",
		s.PrometheusURL, s.Collector.Addr, s.Scorer.Addr, s.Extender.Addr, time.Since(t0).Round(time.Millisecond))

	if o.WaitMetrics {
		s.WaitMetrics(func(node string, m map[string]float64) bool {
			for _, ms := range o.Policy.Metrics {
				if _, ok := m[ms.Name]; !ok {
					return false
				}
			}
			return true
		}, "every node has every metric")
		t.Logf("stack: metrics flowing (%v since start)", time.Since(t0).Round(time.Millisecond))
	}
	if o.Sched != nil {
		s.StartScheduler(*o.Sched)
	}
	return s
}

// dial is a plaintext gRPC connection to addr, closed at the cleanup of s's test.
func (s *Stack) dial(addr string) *grpc.ClientConn {
	s.t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return conn
}

// WithCollector is a copy of s whose CollectorClient reaches the collector at addr (a
// second replica), for the ledger helpers.
func (s *Stack) WithCollector(addr string) *Stack {
	c := *s
	c.CollectorClient = wlv1.NewCollectorServiceClient(s.dial(addr))
	return &c
}

// WithScorer is a copy of s whose ScorerClient reaches the scorer at addr (a second
// replica), for the Score helpers.
func (s *Stack) WithScorer(addr string) *Stack {
	c := *s
	c.ScorerClient = wlv1.NewScorerServiceClient(s.dial(addr))
	return &c
}

// StartExtender starts a waterline-extender (named name in the logs) against the stack's
// scorer and policy, with extra flags after the stack's own (none of which they may
// repeat: clap refuses a flag given twice), and waits until it is ready. New starts the
// stack's extender with it; a test may start another beside it.
func (s *Stack) StartExtender(name string, extra ...string) Service {
	s.t.Helper()
	e := Service{Addr: FreeAddr(s.t), Admin: FreeAddr(s.t)}
	args := []string{"--http-addr", e.Addr, "--admin-addr", e.Admin,
		"--scorer-url", "http://" + s.Scorer.Addr, "--prefix", "/waterline/v1",
		"--scheduler-names", SchedulerName, "--policy", s.PolicyPath,
		// Just under kube-scheduler's httpTimeout (1s): the default 200 ms suits a quiet
		// cluster, but on a loaded test machine a slow call would turn into a neutral answer
		// and a wrong placement, which is not what these scenarios test.
		"--scorer-timeout", "900ms"}
	args = append(args, extra...)
	e.Proc = StartProc(s.t, name, NeedBinary(s.t, "waterline-extender"), args...)
	e.WaitReady(s.ctx, s.t)
	return e
}

// WritePolicy replaces the policy file (the processes reload it).
func (s *Stack) WritePolicy(p Policy) {
	if err := os.WriteFile(s.PolicyPath, []byte(p.YAML()), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// Procs are the stack's three waterline processes.
func (s *Stack) Procs() []*Proc { return []*Proc{s.Collector.Proc, s.Scorer.Proc, s.Extender.Proc} }
