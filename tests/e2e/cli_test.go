package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waterline/waterline/tests/e2e/stack"
)

// TestKubectlWaterline: `kubectl waterline top` and `ledger` against the e2e stack (real
// kube-apiserver and kube-scheduler with the plugin, collector with a --static cluster of 4
// nodes: node-0 at 80 % cpu, the others 20-26 %). After a burst of 6 pods, `top -o json`
// lists every node with the scorer's verdict (node-0 rejected: cpu filterAbove 65) and
// the collector's ledger count per node equal to where kube-scheduler bound the pods,
// `ledger <node> -o json` names exactly the pods bound there, and `explain` of a
// 500m pod gives every node its verdict (node-0 rejected for cpu) with the policy's two terms.
func TestKubectlWaterline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := stack.NeedBinary(t, "kubectl-waterline")
	const nodes, pods = 4, 6
	static := filepath.Join(t.TempDir(), "static.yaml")
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := 0; i < nodes; i++ {
		cpu := 20 + 2*i
		if i == 0 {
			cpu = 80
		}
		fmt.Fprintf(&b, "  - {name: %s, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: %d, mem_usage_avg_5m: 20}}\n", stack.NodeName(i), cpu)
	}
	if err := os.WriteFile(static, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := stack.New(ctx, t, stack.Options{
		Nodes:      nodes,
		StaticFile: static,
		Policy: stack.Policy{
			Metrics: []stack.Metric{stack.CPUAvg5m.WithFilter(65), stack.MemAvg5m},
			Ledger:  true,
		},
	})
	s.StartScheduler(s.WaterlineScheduler(stack.PluginPath))
	counts := s.Burst("default", "cli", pods, stack.WithCPU("500m", ""))
	run := func(args ...string) []byte {
		t.Helper()
		full := append(args, "--scorer", "http://"+s.Scorer.Addr, "--collector", "http://"+s.Collector.Addr, "-o", "json")
		out, err := exec.CommandContext(ctx, bin, full...).Output()
		if err != nil {
			t.Fatalf("kubectl-waterline %s: %v\n%s", strings.Join(full, " "), err, out)
		}
		return out
	}
	type row struct {
		Node       string  `json:"node"`
		Rejected   *string `json:"rejected"`
		LedgerPods int     `json:"ledger_pods"`
	}
	var top struct {
		Nodes []row `json:"nodes"`
	}
	// The collector's ledger holds a Reserve at once; poll only for the forwarding.
	err := stack.WaitFor(ctx, 30*time.Second, 100*time.Millisecond, "top shows the burst in the ledger", func() (bool, error) {
		if err := json.Unmarshal(run("top"), &top); err != nil {
			return false, err
		}
		total := 0
		for _, r := range top.Nodes {
			total += r.LedgerPods
		}
		return total == pods, nil
	})
	if err != nil {
		t.Fatalf("%v: %+v (bound: %s)", err, top.Nodes, stack.FmtCounts(counts))
	}
	if len(top.Nodes) != nodes {
		t.Fatalf("top lists %d nodes, want %d: %+v", len(top.Nodes), nodes, top.Nodes)
	}
	for _, r := range top.Nodes {
		if r.LedgerPods != counts[r.Node] {
			t.Errorf("top: %s holds %d ledger pods, kube-scheduler bound %d there", r.Node, r.LedgerPods, counts[r.Node])
		}
		hot := r.Node == stack.NodeName(0)
		if hot != (r.Rejected != nil) {
			t.Errorf("top: %s rejected = %v, want rejected only for the 80 %% node", r.Node, r.Rejected)
		}
	}
	for node, n := range counts {
		var ledger struct {
			Placements []struct {
				Name string `json:"name"`
			} `json:"placements"`
		}
		if err := json.Unmarshal(run("ledger", node), &ledger); err != nil {
			t.Fatal(err)
		}
		if len(ledger.Placements) != n {
			t.Errorf("ledger %s: %d placements, kube-scheduler bound %d there: %+v", node, len(ledger.Placements), n, ledger.Placements)
		}
		for _, p := range ledger.Placements {
			if !strings.HasPrefix(p.Name, "cli") {
				t.Errorf("ledger %s: unexpected pod %q", node, p.Name)
			}
		}
	}
	var explain struct {
		Nodes []struct {
			Node     string            `json:"node"`
			Feasible bool              `json:"feasible"`
			Reason   *string           `json:"reason"`
			Rank     *int              `json:"rank"`
			Terms    []json.RawMessage `json:"terms"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(run("explain", "--cpu", "500m", "--memory", "256Mi"), &explain); err != nil {
		t.Fatal(err)
	}
	if len(explain.Nodes) != nodes {
		t.Fatalf("explain lists %d nodes, want %d", len(explain.Nodes), nodes)
	}
	for _, v := range explain.Nodes {
		hot := v.Node == stack.NodeName(0)
		if hot == v.Feasible || (hot && (v.Reason == nil || !strings.Contains(*v.Reason, "cpu_usage_avg_5m"))) {
			t.Errorf("explain: %s feasible %v, reason %v; want only node-0 rejected, for cpu", v.Node, v.Feasible, v.Reason)
		}
		if len(v.Terms) != 2 {
			t.Errorf("explain: %s has %d terms, the policy has 2 metrics", v.Node, len(v.Terms))
		}
		if v.Feasible && v.Rank == nil {
			t.Errorf("explain: feasible %s has no rank", v.Node)
		}
	}
	t.Logf("kubectl waterline against the e2e stack: bound %s", stack.FmtCounts(counts))
}
