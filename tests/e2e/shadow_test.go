package e2e

// TestShadow: shadow mode (docs/design.md#shadow-mode) on the real control plane. The collector
// runs with --shadow; kube-scheduler runs its stock default configuration (one profile,
// default-scheduler: request-based scoring, no waterline anywhere) and places a burst of
// pods onto 4 nodes of which two are hot (90 % cpu, waterline's Filter rejects above
// 65 %). The collector judges every bind: the binds onto the hot nodes count as rejected
// by cpu_usage_avg_5m with a positive regret, and ShadowDecisions names, for each pod,
// the node the default scheduler chose and the node waterline would have picked, with the
// scores docs/design.md#water-level-curve predicts. The ledger is on, as in production: each
// bind is judged with the burst's earlier binds in the ledger, and the expected scores count
// those same pods (each at its estimate) on the nodes they were bound to.

import (
	"context"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/tests/e2e/stack"
)

// waterLevelScore is docs/design.md#water-level-curve, rounded half away from zero.
func waterLevelScore(target, u float64) int64 {
	var s float64
	switch {
	case u <= target:
		s = (100-target)*u/target + target
	case u <= 100:
		s = target * (100 - u) / (100 - target)
	}
	return int64(math.Round(s))
}

func TestShadow(t *testing.T) {
	stack.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// node-0 and node-1 hot, node-2 at 20 %, node-3 at 30 % cpu; 8 cores each.
	busy := []float64{0.9, 0.9, 0.2, 0.3}
	hot := map[string]bool{"node-0": true, "node-1": true}
	const target, capMillis, threshold = 40.0, 8000.0, 65.0
	s := stack.New(ctx, t, stack.Options{
		Nodes:   len(busy),
		CPUBusy: func(i int) float64 { return busy[i] },
		// Ledger on: each bind is judged with the earlier binds of the burst in the ledger.
		Policy:        stack.Policy{Metrics: []stack.Metric{stack.CPUAvg5m.WithFilter(threshold)}, Ledger: true},
		WaitMetrics:   true,
		CollectorArgs: []string{"--shadow"},
	})
	if !s.KubeWatch {
		t.Fatalf("BLOCKED: waterline-collector has no --kubeconfig: no pod watch to judge binds from")
	}
	s.WaitMetrics(func(n string, m map[string]float64) bool {
		v, ok := m["cpu_usage_avg_5m"]
		if hot[n] {
			return ok && v > 80
		}
		return ok && v < 40
	}, "node-0 and node-1 above 80 % cpu, the others below 40 %")
	obs, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}

	// The stock kube-scheduler: default configuration, profile default-scheduler.
	s.StartSchedulerConfig("")

	// Prediction (docs/design.md#predicted-utilisation): U = observed + ledger + incoming. Every
	// pod requests 100m cpu and sets no limit, so its estimate is 100m × 0.85 = 85m, 1.0625 % of
	// 8 cores: the incoming pod's, and each earlier pod's of the burst on the node it was bound
	// to (the pod watch's ledger entry, counted for the 7 m absorb window, far longer than the
	// test). `before` counts those earlier pods per node; the best is the top score among the
	// nodes Filter passes (not the hot ones: 90 % > 65 %).
	const podPercent = 100 * 85 / capMillis
	predict := func(before map[string]int) (map[string]int64, int64) {
		score := map[string]int64{}
		bestScore := int64(-1)
		for _, n := range s.Nodes {
			u := obs[n]["cpu_usage_avg_5m"] + podPercent*float64(before[n]) + podPercent
			score[n] = waterLevelScore(target, u)
			if !hot[n] && score[n] > bestScore {
				bestScore = score[n]
			}
		}
		return score, bestScore
	}
	first, firstBest := predict(map[string]int{})
	t.Logf("predicted scores of the first bind %v: waterline's best scores %d", first, firstBest)

	ns := "default"
	const burst = 8
	names := stack.PodNames("shadow", burst)
	var pods []*v1.Pod
	for _, n := range names {
		pods = append(pods, stack.NewPod(ns, n, func(p *v1.Pod) { p.Spec.SchedulerName = v1.DefaultSchedulerName }))
	}
	s.CreatePods(pods, burst)
	placed := s.WaitScheduled(ns, names, time.Minute)
	counts := s.CountPerNode(placed)
	onHot := counts["node-0"] + counts["node-1"]
	t.Logf("default-scheduler placements: %s (%d on the hot nodes)", stack.FmtCounts(counts), onHot)
	if onHot == 0 {
		t.Fatalf("the default scheduler placed no pod on a hot node (%s): nothing to judge as rejected", stack.FmtCounts(counts))
	}

	var got *wlv1.ShadowDecisionsResponse
	err = stack.WaitFor(ctx, 30*time.Second, 200*time.Millisecond, "every bind in ShadowDecisions", func() (bool, error) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		got, err = s.CollectorClient.ShadowDecisions(cctx, &wlv1.ShadowDecisionsRequest{SchedulerName: v1.DefaultSchedulerName})
		return err == nil && len(got.GetDecisions()) >= burst, err
	})
	if err != nil {
		t.Fatalf("%v\n--- collector ---\n%s", err, s.Collector.Tail(3000))
	}
	if len(got.GetDecisions()) != burst || got.GetJudged() != burst || got.GetDropped() != 0 {
		t.Errorf("ShadowDecisions: %d decisions, judged %d, dropped %d; want %d, %d, 0",
			len(got.GetDecisions()), got.GetJudged(), got.GetDropped(), burst, burst)
	}
	near := func(a int32, b int64) bool { return int64(a)-b <= 1 && b-int64(a) <= 1 }
	seen := map[string]bool{}
	var regretSum int64
	// Newest first: judged in the opposite order, each with the pods judged before it.
	decisions := got.GetDecisions()
	before := map[string]int{}
	for i := len(decisions) - 1; i >= 0; i-- {
		d := decisions[i]
		name := d.GetPodName()
		seen[name] = true
		chosen := d.GetChosenNode()
		score, bestScore := predict(before)
		t.Logf("%s: chosen %s (%d) rejected %q, best %s (%d), regret %d",
			name, chosen, d.GetChosenScore(), d.GetRejectedReason(), d.GetBestNode(), d.GetBestScore(), d.GetRegret())
		if chosen != placed[name] || d.GetSchedulerName() != v1.DefaultSchedulerName {
			t.Errorf("%s: decision says %s chose %s; the API server says default-scheduler bound it to %s", name, d.GetSchedulerName(), chosen, placed[name])
		}
		// The best node: one the prediction scores at the top (within the rounding of ±1).
		if bn := d.GetBestNode(); hot[bn] || !near(d.GetBestScore(), bestScore) || !near(int32(score[bn]), bestScore) {
			t.Errorf("%s: best %s (%d), predicted best score %d (%s predicted %d); ledger before it %v",
				name, bn, d.GetBestScore(), bestScore, bn, score[bn], before)
		}
		if !near(d.GetChosenScore(), score[chosen]) {
			t.Errorf("%s: chosen %s scored %d, predicted %d", name, chosen, d.GetChosenScore(), score[chosen])
		}
		if d.GetRegret() != max(0, d.GetBestScore()-d.GetChosenScore()) {
			t.Errorf("%s: regret %d is not best %d - chosen %d", name, d.GetRegret(), d.GetBestScore(), d.GetChosenScore())
		}
		regretSum += int64(d.GetRegret())
		if !d.GetChosenFitsRequests() || !d.GetChosenKnown() || d.GetCandidateNodes() != 4 || d.GetFeasibleNodes() != 2 {
			t.Errorf("%s: fits %t known %t, %d candidates, %d feasible; want true, true, 4, 2",
				name, d.GetChosenFitsRequests(), d.GetChosenKnown(), d.GetCandidateNodes(), d.GetFeasibleNodes())
		}
		reason := d.GetRejectedReason()
		if hot[chosen] {
			if !strings.HasPrefix(reason, "cpu_usage_avg_5m ") || !strings.HasSuffix(reason, "% > 65%") ||
				len(d.GetRejectedBy()) != 1 || d.GetRejectedBy()[0] != "cpu_usage_avg_5m" || d.GetRegret() <= 0 {
				t.Errorf("%s on hot %s: reason %q, rejected_by %v, regret %d; want a cpu_usage_avg_5m rejection and a positive regret",
					name, chosen, reason, d.GetRejectedBy(), d.GetRegret())
			}
		} else if reason != "" {
			t.Errorf("%s on %s (below the threshold): rejected %q", name, chosen, reason)
		}
		before[chosen]++
	}
	if len(seen) != burst {
		var missing []string
		for _, n := range names {
			if !seen[n] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		t.Errorf("no decision for %v", missing)
	}

	// The same on the collector's /metrics: each the one series of its name and labels.
	scrapeOne := func(name string, labels ...string) float64 {
		t.Helper()
		v, err := stack.One(stack.Admin(s.Collector.Admin), name, labels...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	sched := []string{"scheduler", v1.DefaultSchedulerName}
	checks := []struct {
		what string
		got  float64
		want float64
	}{
		{"binds rejected by cpu_usage_avg_5m", scrapeOne("waterline_shadow_rejected_binds_total", append(sched, "metric", "cpu_usage_avg_5m")...), float64(onHot)},
		{"binds judged rejected", scrapeOne("waterline_shadow_binds_total", append(sched, "verdict", "rejected")...), float64(onHot)},
		{"binds judged accepted", scrapeOne("waterline_shadow_binds_total", append(sched, "verdict", "accepted")...), float64(burst - onHot)},
		{"regret observations", scrapeOne("waterline_shadow_regret_count", sched...), burst},
		{"regret sum", scrapeOne("waterline_shadow_regret_sum", sched...), float64(regretSum)},
		{"binds dropped", scrapeOne("waterline_shadow_dropped_total"), 0},
		{"judge durations", scrapeOne("waterline_shadow_judge_duration_seconds_count"), burst},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("/metrics: %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if regretSum <= 0 {
		t.Errorf("regret sum %d: the binds onto the hot nodes must show a positive regret", regretSum)
	}
	// Predicted − target on the chosen nodes: above the level on the hot nodes (> 0),
	// below it on the cool ones: the +Inf bucket counts all, the 0 bucket the cool ones.
	atOrBelow := scrapeOne("waterline_shadow_chosen_level_minus_target_bucket", append(sched, "metric", "cpu_usage_avg_5m", "le", "0.0")...)
	if atOrBelow != float64(burst-onHot) {
		t.Errorf("/metrics: chosen level at or below the water level for %v binds, want %d", atOrBelow, burst-onHot)
	}
}
