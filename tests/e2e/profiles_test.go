package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/waterline/waterline/plugin/waterline"
	"github.com/waterline/waterline/tests/e2e/stack"
)

// TestProfilesWithTheirOwnPolicies: one scorer serves two named policies (`--policy
// pack=…`, `--policy spread=…`), one kube-scheduler has two profiles whose Waterline
// plugin args name them (`policy: pack`, `policy: spread`; kube-scheduler gives every
// profile its own plugin args), and the same burst sent to each profile lands differently:
// the packing profile fills the busy nodes toward its 80 % water level, the spreading one
// fills the cool nodes first (docs/operations.md#policies-per-profile). Plugin path only:
// kube-scheduler's extenders are global to the configuration, not per profile, so on the
// extender path each policy's URL prefix needs a scheduler of its own.
func TestProfilesWithTheirOwnPolicies(t *testing.T) {
	stack.SkipShort(t)
	ctx := t.Context()
	dir := t.TempDir()
	const nodes = 4
	// cpu 10, 30, 50, 60 % on 8-cpu nodes; a burst pod (500m × 0.85) adds 5.3 %.
	levels := []int{10, 30, 50, 60}
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := 0; i < nodes; i++ {
		fmt.Fprintf(&b, "  - {name: %s, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: %d, mem_usage_avg_5m: 20}}\n",
			stack.NodeName(i), levels[i])
	}
	static := filepath.Join(dir, "static.yaml")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(static, b.String())
	metrics := []stack.Metric{stack.CPUAvg5m.WithFilter(90), stack.MemAvg5m}
	pack := filepath.Join(dir, "pack.yaml")
	write(pack, stack.Policy{Metrics: metrics, Curve: "{kind: waterLevel, target: 80}", Ledger: true}.YAML())
	spread := filepath.Join(dir, "spread.yaml")
	write(spread, stack.Policy{Metrics: metrics, Curve: "{kind: leastUsed}", Ledger: true}.YAML())

	s := stack.New(ctx, t, stack.Options{
		Nodes:       nodes,
		StaticFile:  static,
		Policy:      stack.Policy{Metrics: metrics, Ledger: true},
		WaitMetrics: true,
		ScorerArgs:  []string{"--policy", "pack=" + pack, "--policy", "spread=" + spread},
	})

	const packProfile, spreadProfile = "waterline-pack", "waterline-spread"
	profile := func(name, policy string) string {
		return fmt.Sprintf(`  - schedulerName: %[1]s
    plugins:
      multiPoint: {enabled: [{name: %[2]s, weight: 5}]}
      score: {disabled: [{name: '*'}], enabled: [{name: %[2]s, weight: 5}]}
    pluginConfig:
      - name: %[2]s
        args: {endpoint: %[3]q, timeout: 1s, failOpen: false, policy: %[4]s}
`, name, waterline.Name, s.Scorer.Addr, policy)
	}
	config := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 100\nprofiles:\n" +
		profile(packProfile, "pack") + profile(spreadProfile, "spread")
	configPath := filepath.Join(dir, "scheduler.yaml")
	write(configPath, config)
	s.StartSchedulerConfig(configPath)

	// 8 pods × 5.3 % fit under the 80 % level on the two busy nodes (60 → 76, 50 → 76.5).
	const burst = 8
	toProfile := func(name string) stack.PodOpt {
		return func(p *v1.Pod) { p.Spec.SchedulerName = name }
	}
	packed := s.Burst("default", "pack", burst, stack.WithCPU("500m", ""), toProfile(packProfile))
	spreadOut := s.Burst("default", "spread", burst, stack.WithCPU("500m", ""), toProfile(spreadProfile))
	t.Logf("pack: %v; spread: %v", packed, spreadOut)

	busy := func(per map[string]int) int { return per[stack.NodeName(2)] + per[stack.NodeName(3)] }
	cool := func(per map[string]int) int { return per[stack.NodeName(0)] + per[stack.NodeName(1)] }
	// Pack: n3 (60 %) nearest the 80 % level takes pods toward it, then n2 — the burst on the
	// busy pair. Spread: least used fills n0 from 10 % (to 30 %, where n1 ties), then both;
	// n2 at 50 % would only tie past 8 pods. Each profile at least 6 of 8 on its pair, and
	// the two bursts on opposite pairs.
	if busy(packed) < 6 {
		t.Errorf("pack profile put %d of %d pods on the busy nodes, want at least %d: %v", busy(packed), burst, 6, packed)
	}
	if cool(spreadOut) < 6 {
		t.Errorf("spread profile put %d of %d pods on the cool nodes, want at least %d: %v", cool(spreadOut), burst, 6, spreadOut)
	}
	if busy(packed) <= busy(spreadOut) {
		t.Errorf("the same burst landed alike: pack %v, spread %v", packed, spreadOut)
	}
}
