package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// ListNodes calls CollectorService/ListNodes.
func (s *Stack) ListNodes() (*wlv1.ListNodesResponse, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	return s.CollectorClient.ListNodes(ctx, &wlv1.ListNodesRequest{})
}

// Metrics is the collector's node -> metric -> value percent.
func (s *Stack) Metrics() (map[string]map[string]float64, error) {
	resp, err := s.ListNodes()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for _, n := range resp.GetNodes() {
		m := map[string]float64{}
		for _, ms := range n.GetMetrics() {
			m[ms.GetMetric()] = ms.GetValuePercent()
		}
		out[n.GetName()] = m
	}
	return out, nil
}

// WaitMetrics waits (90 s) until ok(node, metrics) holds for every fake node.
func (s *Stack) WaitMetrics(ok func(node string, m map[string]float64) bool, what string) {
	s.t.Helper()
	var last map[string]map[string]float64
	err := WaitFor(s.ctx, 90*time.Second, 500*time.Millisecond, what, func() (bool, error) {
		all, err := s.Metrics()
		if err != nil {
			return false, err
		}
		last = all
		for _, n := range s.Nodes {
			if !ok(n, all[n]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatalf("%v\nlast ListNodes metrics: %v\n--- collector ---\n%s", err, last, s.Collector.Tail(3000))
	}
}

// Ledger is the collector's ledger, pod uid -> entry.
func (s *Stack) Ledger() (map[string]*wlv1.LedgerEntry, error) {
	resp, err := s.ListNodes()
	if err != nil {
		return nil, err
	}
	out := map[string]*wlv1.LedgerEntry{}
	for _, e := range resp.GetLedger() {
		// A departure (a deleted pod's credit until the metric absorbs it) is not a placement.
		if e.GetSource() == wlv1.LedgerSource_LEDGER_SOURCE_DEPARTURE {
			continue
		}
		out[e.GetPodUid()] = e
	}
	return out, nil
}

// WaitLedger waits until the collector's ledger holds ns/name.
func (s *Stack) WaitLedger(ns, name string) {
	s.t.Helper()
	err := WaitFor(s.ctx, 30*time.Second, 100*time.Millisecond, "ledger entry "+ns+"/"+name, func() (bool, error) {
		l, err := s.Ledger()
		if err != nil {
			return false, err
		}
		for _, e := range l {
			if e.GetNamespace() == ns && e.GetName() == name {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// ScorerTerms is, per node and metric, the term of the scorer's Score with explain for
// pod: what the scorer predicts (observed, ledger, incoming percent).
func (s *Stack) ScorerTerms(pod *wlv1.PodInfo) (map[string]map[string]*wlv1.ScoreTerm, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	resp, err := s.ScorerClient.Score(ctx, &wlv1.ScoreRequest{Pod: pod, NodeNames: s.Nodes, Explain: true})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]*wlv1.ScoreTerm{}
	for _, ns := range resp.GetScores() {
		m := map[string]*wlv1.ScoreTerm{}
		for _, term := range ns.GetTerms() {
			m[term.GetMetric()] = term
		}
		out[ns.GetNodeName()] = m
	}
	return out, nil
}

// WaitScorerTerms waits until the scorer explains every node with exactly `metrics`
// fresh terms; returns node -> metric -> observed percent.
func (s *Stack) WaitScorerTerms(pod *wlv1.PodInfo, metrics int, what string) map[string]map[string]float64 {
	s.t.Helper()
	var last map[string]map[string]*wlv1.ScoreTerm
	err := WaitFor(s.ctx, 60*time.Second, 100*time.Millisecond, what, func() (bool, error) {
		terms, err := s.ScorerTerms(pod)
		if err != nil {
			return false, err
		}
		last = terms
		for _, n := range s.Nodes {
			if len(terms[n]) != metrics {
				return false, nil
			}
			for _, term := range terms[n] {
				if term.GetStale() {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatalf("%v; last explain: %v", err, last)
	}
	out := map[string]map[string]float64{}
	for n, ms := range last {
		out[n] = map[string]float64{}
		for m, term := range ms {
			out[n][m] = term.GetObservedPercent()
		}
	}
	return out
}

// ScorerLedgerPercent is, per node, the ledger share (percent of capacity, summed over
// the policy's metrics) that the scorer itself would add for recent placements: what it
// has learnt of the ledger, which reaches it over the collector's stream after the
// collector.
func (s *Stack) ScorerLedgerPercent() (map[string]float64, error) {
	terms, err := s.ScorerTerms(&wlv1.PodInfo{Namespace: "default", Name: "ledger-probe", Uid: "ledger-probe", CpuRequestMillis: 1})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for node, ms := range terms {
		for _, term := range ms {
			out[node] += term.GetLedgerPercent()
		}
	}
	return out, nil
}

// WaitScorerLedgerGrows waits until the scorer's ledger share on node exceeds
// before[node]: the placement that raised the collector's ledger has reached the scorer.
func (s *Stack) WaitScorerLedgerGrows(node string, before map[string]float64) {
	s.t.Helper()
	err := WaitFor(s.ctx, 30*time.Second, 50*time.Millisecond, "scorer's ledger share on "+node, func() (bool, error) {
		now, err := s.ScorerLedgerPercent()
		return err == nil && now[node] > before[node], err
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// WaitScorerLedgerEmpty waits until the scorer adds no ledger share on any node.
func (s *Stack) WaitScorerLedgerEmpty() {
	s.t.Helper()
	err := WaitFor(s.ctx, 60*time.Second, 100*time.Millisecond, "the scorer's ledger empty", func() (bool, error) {
		l, err := s.ScorerLedgerPercent()
		if err != nil {
			return false, err
		}
		for _, v := range l {
			if v > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// LedgerCheck is the outcome of one comparison of the ledger with the pods.
type LedgerCheck struct {
	Problems []string
	Pods     int // bound pods compared
	// AtScheduled: entries placed exactly at the PodScheduled second (learnt from the pod
	// watch); the others carry an earlier Reserve or provisional time.
	AtScheduled int
}

// LedgerMismatches compares the collector's ledger (ListNodes, what it streams to the
// scorers) with the pods of the namespaces. Every bound pod must have one entry, on its
// node, placed between its creation and its bind. The API keeps both times to the second:
// creationTimestamp's second <= placed_at < the PodScheduled second + 1 s. A Reserve (or
// the extender's provisional guess) is stamped before the bind, with milliseconds; an
// entry only the watch saw is the PodScheduled time itself. The pod watch must have
// confirmed every entry (an unconfirmed Reserve or provisional guess expires). Every entry
// of those namespaces must be a bound pod, and no pod may have two.
func (s *Stack) LedgerMismatches(namespaces ...string) (LedgerCheck, error) {
	var c LedgerCheck
	resp, err := s.ListNodes()
	if err != nil {
		return c, err
	}
	ledger := map[string]*wlv1.LedgerEntry{}
	for _, e := range resp.GetLedger() {
		if prev := ledger[e.GetPodUid()]; prev != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("%s/%s has two ledger entries (%s and %s)", e.GetNamespace(), e.GetName(), prev.GetNodeName(), e.GetNodeName()))
		}
		ledger[e.GetPodUid()] = e
	}
	inScope := map[string]bool{}
	bound := map[string]bool{}
	for _, ns := range namespaces {
		inScope[ns] = true
		list, err := s.Cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return c, err
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			c.Pods++
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
				c.Problems = append(c.Problems, fmt.Sprintf("%s/%s (bound to %s) has no ledger entry", ns, p.Name, p.Spec.NodeName))
				continue
			case e.GetNodeName() != p.Spec.NodeName:
				c.Problems = append(c.Problems, fmt.Sprintf("%s/%s: ledger says %s, bound to %s", ns, p.Name, e.GetNodeName(), p.Spec.NodeName))
				continue
			case e.GetSource() != wlv1.LedgerSource_LEDGER_SOURCE_WATCH:
				// A Reserve or a provisional guess the pod watch never confirmed expires.
				c.Problems = append(c.Problems, fmt.Sprintf("%s/%s (bound to %s): the pod watch has not confirmed its entry (%v)", ns, p.Name, p.Spec.NodeName, e.GetSource()))
				continue
			case scheduled.IsZero():
				c.Problems = append(c.Problems, fmt.Sprintf("%s/%s is bound but has no PodScheduled=True condition", ns, p.Name))
				continue
			}
			at := e.GetPlacedAt().AsTime()
			created := p.CreationTimestamp.Time
			if at.Before(created) || !at.Before(scheduled.Add(time.Second)) {
				c.Problems = append(c.Problems, fmt.Sprintf("%s/%s: placed_at %s (%v) outside [created %s, PodScheduled %s + 1s)",
					ns, p.Name, at.Format(time.RFC3339Nano), e.GetSource(), created.Format(time.RFC3339), scheduled.Format(time.RFC3339)))
				continue
			}
			if at.Equal(scheduled) {
				c.AtScheduled++
			}
		}
	}
	for uid, e := range ledger {
		if inScope[e.GetNamespace()] && !bound[uid] {
			c.Problems = append(c.Problems, fmt.Sprintf("ledger entry %s/%s on %s (%v) is not a bound pod", e.GetNamespace(), e.GetName(), e.GetNodeName(), e.GetSource()))
		}
	}
	sort.Strings(c.Problems)
	return c, nil
}

// CheckLedger waits (the pod watch and forwarded Reserves take a moment) until the ledger
// equals the pods of the namespaces, and fails s's test (Errorf) with the differences if
// it never does.
func (s *Stack) CheckLedger(namespaces ...string) LedgerCheck {
	s.t.Helper()
	var last LedgerCheck
	err := WaitFor(s.ctx, 30*time.Second, 300*time.Millisecond, "the ledger to equal the pods", func() (bool, error) {
		c, err := s.LedgerMismatches(namespaces...)
		last = c
		return err == nil && len(c.Problems) == 0, err
	})
	if err != nil {
		s.t.Errorf("%v: %d bound pods, %d problem(s):\n  %s", err, last.Pods, len(last.Problems), strings.Join(last.Problems, "\n  "))
	}
	return last
}

// KubeconfigVia writes a copy of the kubeconfig src whose clusters point at server (a
// proxy in front of the API server: the serving certificate names 127.0.0.1, not a port).
func KubeconfigVia(t testing.TB, src, server string) string {
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
