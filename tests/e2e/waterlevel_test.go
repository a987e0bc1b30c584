package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/waterline/waterline/tests/e2e/stack"
)

// TestWaterLevel: 4 nodes at 10, 20, 30 and 50 % cpu, the water-level curve
// with target 40, ledger on, `scoreMapping: rescale`. Ten pods (estimate
// 425m = 5.3125 % of 8 cores each) are created one at a time, each after the
// previous one's placement has reached the ledger. Every placement must be a
// node docs/design.md predicts: U = observed + ledger + incoming, score =
// water level(U) rounded, mapped 0..10 by rescale, the highest wins (ties:
// any of them). Expected shape: the 30 % node first, then the 20 % node until
// it passes 40, then the 10 % node until it passes 40; the 50 % node (above
// the target) gets none.
//
// On the plugin path the scheduler sees the scorer's 0..100 score itself (no
// extender mapping), so the prediction is the highest rounded score.
func TestWaterLevel(t *testing.T) { stack.EachPath(t, testWaterLevel) }

func testWaterLevel(t *testing.T, path stack.Path) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	busy := []float64{0.10, 0.20, 0.30, 0.50}
	const target, capMillis, estMillis = 40.0, 8000.0, 425.0
	s := stack.New(ctx, t, stack.Options{
		Nodes:       len(busy),
		CPUBusy:     func(i int) float64 { return busy[i] },
		Policy:      stack.Policy{Metrics: []stack.Metric{stack.CPUAvg5m}, Ledger: true, ScoreMapping: "rescale"},
		WaitMetrics: true,
	})
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch feeds the ledger")
	}
	obs, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	s.StartScheduler(s.WaterlineScheduler(path))
	ns := "default"
	ledger := map[string]float64{} // node -> ledger millis
	var seq []string
	for k := 0; k < 10; k++ {
		// Prediction.
		raw := map[string]int64{}
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for _, n := range s.Nodes {
			u := obs[n]["cpu_usage_avg_5m"] + 100*(ledger[n]+estMillis)/capMillis
			r := waterLevelScore(target, u)
			raw[n] = r
			lo, hi = min(lo, r), max(hi, r)
		}
		best := []string{}
		for _, n := range s.Nodes {
			m := int64(10)
			if path == stack.PluginPath {
				// The plugin hands the scorer's score to the framework unchanged.
				if raw[n] == hi {
					best = append(best, n)
				}
				continue
			}
			if hi != lo {
				m = int64(math.Round(float64(raw[n]-lo) * 10 / float64(hi-lo)))
			}
			if m == 10 {
				best = append(best, n)
			}
		}
		sort.Strings(best)

		name := fmt.Sprintf("wl-%d", k)
		before, err := s.ScorerLedgerPercent()
		if err != nil {
			t.Fatal(err)
		}
		s.CreatePods([]*v1.Pod{stack.NewPod(ns, name, stack.WithCPU("100m", "500m"))}, 1)
		got := s.WaitScheduled(ns, []string{name}, time.Minute)[name]
		s.WaitLedger(ns, name)
		s.WaitScorerLedgerGrows(got, before) // the next prediction counts this pod
		ok := false
		for _, b := range best {
			ok = ok || b == got
		}
		t.Logf("pod %d: predicted %v (scores %v) -> %s", k, best, raw, got)
		if !ok {
			t.Errorf("pod %s placed on %s; the water level predicts %v (node scores %v)", name, got, best, raw)
		}
		ledger[got] += estMillis
		seq = append(seq, got)
	}
	t.Logf("sequence: %s", strings.Join(seq, " "))
}
