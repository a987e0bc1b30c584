package e2e

// TestHAWhileFaulted: two collectors, two scorers, and the ledger checked while each fault
// still holds (RELIABILITY.md "HA while the fault holds"). TestCollectorKillMidBurst looks
// only after everything settled; here every step of the sequence is judged mid-fault.
//
// Collectors A and B (the same flags; each polls Prometheus and watches the API server on
// its own) reach Prometheus and the API server through their own fault proxies, and the
// scorers reach each collector through one (--collector-url toA,toB): a scorer streams from
// one collector and forwards every Reserve to both. Scorer 1 serves kube-scheduler's two
// profiles (the extender path and the plugin path, as TestLongFaults); scorer 2 serves
// nobody and learns every placement from the collectors' streams only. The steps, one
// after the other, each during its own burst (haBurst pods per profile, one every haGap)
// and held at least haHold:
//
//  1. A's pod watch cut (its API server proxy black-holed) while B keeps its own — the
//     scorers stream from A (the first --collector-url);
//  2. A cut from Prometheus;
//  3. A cut from the scorers: its proxy drops packets without resetting the connection, so
//     a scorer notices only by the stream's silence (--collector-silence, 6 s: the
//     collector's 2 s heartbeat missed three times) and fails over to B;
//  4. B SIGKILLed mid-burst and restarted: the scorers fail over back to A.
//
// After each burst is placed, with the fault still held, within haRound (the bound of one
// stream round — the pod watch's delivery, a forward, the collector's publish and the
// scorer's apply — plus a failover and a loaded machine's slack) the working collector's
// ledger holds every bound pod of every step exactly once (stack.LedgerMismatches: none
// missing, none twice, none extra), and each scorer adds per node exactly the ledger share
// of that collector's entries — so neither scorer misses a placement or counts one twice.
// At the end both collectors' ledgers equal the pods.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/waterline/waterline/tests/e2e/stack"
)

const (
	haBurst = 6 // pods per profile per step
	haGap   = 150 * time.Millisecond
	haRound = 15 * time.Second
	haHold  = 12 * time.Second
)

type haStack struct {
	*stack.Stack
	a, b                  stack.Service
	promA, apiA, toA, toB *stack.FaultProxy
	scorer2               stack.Service
	namespaces            []string
}

func TestHAWhileFaulted(t *testing.T) {
	stack.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	s := stack.New(ctx, t, faultStackOptions())
	h := &haStack{Stack: s, a: s.Collector}
	promAddr := strings.TrimPrefix(s.PrometheusURL, "http://")
	apiAddr := strings.TrimPrefix(s.Cluster.Server, "https://")

	// A through its own proxies.
	h.promA, h.apiA = stack.StartProxy(t, promAddr), stack.StartProxy(t, apiAddr)
	s.Collector.SetFlag("--prometheus-url", "http://"+h.promA.Addr())
	s.Collector.SetFlag("--prometheus-timeout", faultPromTimeout)
	s.Collector.SetFlag("--kube-watch-timeout", faultWatchTimeout)
	s.Collector.SetFlag("--kubeconfig", stack.KubeconfigVia(t, s.Cluster.KubeconfigPath, "https://"+h.apiA.Addr()))
	s.Collector.RestartReady(ctx, t)
	// B: A's flags on its own ports, straight to Prometheus and the API server.
	bGRPC, bAdmin := stack.FreeAddr(t), stack.FreeAddr(t)
	bProc := stack.StartProc(t, "collector-b", s.Collector.Path, stack.WithFlags(s.Collector.Args(),
		"--grpc-addr", bGRPC, "--admin-addr", bAdmin,
		"--prometheus-url", s.PrometheusURL, "--kubeconfig", s.Cluster.KubeconfigPath)...)
	h.b = stack.Service{Proc: bProc, Addr: bGRPC, Admin: bAdmin}
	h.b.WaitReady(ctx, t)

	// The scorers reach each collector through a proxy.
	h.toA, h.toB = stack.StartProxy(t, s.Collector.Addr), stack.StartProxy(t, bGRPC)
	urls := "http://" + h.toA.Addr() + ",http://" + h.toB.Addr()
	s.Scorer.SetFlag("--collector-url", urls)
	s.Scorer.RestartReady(ctx, t)
	s2GRPC, s2Admin := stack.FreeAddr(t), stack.FreeAddr(t)
	s2 := stack.StartProc(t, "scorer-2", s.Scorer.Path, stack.WithFlags(s.Scorer.Args(),
		"--grpc-addr", s2GRPC, "--admin-addr", s2Admin)...)
	h.scorer2 = stack.Service{Proc: s2, Addr: s2GRPC, Admin: s2Admin}
	h.scorer2.WaitReady(ctx, t)

	s.StartSchedulerConfig(dualProfileConfig(t, s.Scorer.Addr, s.Extender.ExtenderURL()))
	t.Logf("two collectors, two scorers, one scheduler with both paths (%v since start)", time.Since(t0).Round(time.Millisecond))

	// The scorers stream from A first (the first --collector-url), so the first two steps
	// fault the collector they read; the third moves them to B; the fourth restarts B,
	// moving them back to A.
	steps := []haStep{
		{"a-pod-watch-cut", func() { h.apiA.BlackHole(); h.apiA.CutAll() }, h.apiA.Pass, h.b},
		{"a-cut-from-prometheus", h.promA.BlackHole, h.promA.Pass, h.b},
		{"a-cut-from-the-scorers", h.toA.BlackHole, h.toA.Pass, h.b},
		{"b-restarted-mid-burst", func() { h.b.Kill(); h.b.Restart(t) }, func() { h.b.WaitReady(ctx, t) }, h.a},
	}
	var lines []string
	for _, step := range steps {
		ok := t.Run(step.name, func(t *testing.T) { lines = append(lines, h.step(t, step)) })
		if !ok {
			t.Fatalf("%s failed; the remaining steps are not run", step.name)
		}
	}
	// Healed: both ledgers equal the pods.
	for _, c := range []stack.Service{h.a, h.b} {
		lc := s.WithCollector(c.Addr).CheckLedger(h.namespaces...)
		lines = append(lines, fmt.Sprintf("after the heal: %s's ledger equals the %d bound pods\n", c.Name, lc.Pods))
	}
	stack.AppendResult(t, "ha-faults.txt", time.Now().UTC().Format(time.RFC3339)+"\n"+strings.Join(lines, ""))
	procs := append(s.Procs(), h.b.Proc, h.scorer2.Proc)
	stack.KeepLogs(t, "ha-faulted", procs...)
	stack.CheckNoPanic(t, procs...)
}

// pace creates haBurst pods per profile, alternating, one every haGap.
func (h *haStack) pace(ns string) ([]string, <-chan error) {
	var pods []*v1.Pod
	for i := 0; i < haBurst; i++ {
		for _, profile := range lfProfiles {
			p := stack.NewPod(ns, fmt.Sprintf("%s-%d", profile, i))
			p.Spec.SchedulerName = profile
			pods = append(pods, p)
		}
	}
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	done := make(chan error, 1)
	go func() {
		for i, p := range pods {
			if i > 0 {
				time.Sleep(haGap)
			}
			if _, err := h.Cluster.Client.CoreV1().Pods(ns).Create(h.Ctx(), p, metav1.CreateOptions{}); err != nil {
				done <- fmt.Errorf("create %s/%s: %w", ns, p.Name, err)
				return
			}
		}
		done <- nil
	}()
	return names, done
}

// haStep is one fault of the sequence; judge is the collector that keeps working, whose
// ledger every scorer must match while the fault holds.
type haStep struct {
	name         string
	inject, heal func()
	judge        stack.Service
}

func (h *haStack) step(t *testing.T, st haStep) string {
	name, inject, heal := st.name, st.inject, st.heal
	s := h.Stack.ForTest(t)
	ns := "ha-" + name
	s.EnsureNamespace(ns)
	h.namespaces = append(h.namespaces, ns)
	names, created := h.pace(ns)
	s.WaitScheduled(ns, names[:4], time.Minute)
	inject()
	injected := time.Now()
	if err := <-created; err != nil {
		heal()
		t.Fatal(err)
	}
	s.WaitScheduled(ns, names, 2*time.Minute)
	placed := time.Now()
	// Held at least haHold, so the faulted collector's own timeouts (its watch's 10 s of
	// silence, its 2 s Prometheus timeout) run while the scorers are judged.
	if d := haHold - time.Since(injected); d > 0 {
		time.Sleep(d)
	}

	// Still faulted: the judge's ledger and both scorers' within one stream round.
	b := s.WithCollector(st.judge.Addr)
	scorers := []*stack.Stack{s, s.WithScorer(h.scorer2.Addr)}
	var problem string
	err := stack.WaitFor(s.Ctx(), haRound, 200*time.Millisecond, "every placement exactly once in the judge's ledger and in each scorer's", func() (bool, error) {
		c, err := b.LedgerMismatches(h.namespaces...)
		if err != nil {
			return false, err
		}
		if len(c.Problems) > 0 {
			problem = st.judge.Name + ": " + strings.Join(c.Problems, "; ")
			return false, nil
		}
		l, err := b.Ledger()
		if err != nil {
			return false, err
		}
		want := expectedLedgerPercent(l)
		for i, sc := range scorers {
			got, err := sc.ScorerLedgerPercent()
			if err != nil {
				return false, err
			}
			for _, node := range s.Nodes {
				if math.Abs(got[node]-want[node]) > 1e-6 {
					problem = fmt.Sprintf("scorer %d adds %.3f %% on %s, %s's entries %.3f %%", i+1, got[node], node, st.judge.Name, want[node])
					return false, nil
				}
			}
		}
		return true, nil
	})
	caughtUp := time.Since(placed) - max(haHold-placed.Sub(injected), 0)
	held := time.Since(injected)
	heal()
	if err != nil {
		t.Fatalf("%v while %s held: %s", err, name, problem)
	}
	line := fmt.Sprintf("%s: held %v; %d pods placed on both paths under it; %s's ledger and both scorers' held every placement exactly once %v after the hold (bound %v)\n",
		name, held.Round(100*time.Millisecond), len(names), st.judge.Name, caughtUp.Round(100*time.Millisecond), haRound)
	t.Log(line)
	return line
}
