// Package waterline is a kube-scheduler framework plugin that asks waterline's scorer where
// a pod should go. It is only a client: the load data, the ledger of recent placements and
// the policy all live in the scorer (waterline.v1.ScorerService).
//
// The scheduler calls Filter and Score once per node, concurrently. A remote call per node
// would cost hundreds of RPCs per pod, so the plugin makes **one** blocking call per
// scheduling cycle, an Evaluate on its Session stream (session.go), and hands the answer to
// the per-node calls through CycleState:
//
//	PreFilter  -> Evaluate on the stream, waited for -> feasible set, reasons and scores in CycleState
//	Filter     -> lookup                       (per node, no I/O)
//	PreScore   -> nothing                      (the scores came with the Evaluate)
//	Score      -> lookup                       (per node, no I/O)
//	Reserve    -> Reserve written to the stream, not waited for (the ledger sees the
//	              placement before the next pod's Evaluate: the stream keeps the order)
//	Unreserve  -> Unreserve written to the stream (the placement was abandoned)
//
// A scorer that answers Session with UNIMPLEMENTED (older than the Session contract) is
// asked with the unary RPCs instead: Filter (all_nodes) at PreFilter, Score at PreScore,
// Reserve and Unreserve, each waited for. The arg `session: false` makes the plugin use
// that path always, without opening a stream (args.go).
package waterline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Waterline"

// NeutralScore is every node's score when the Score RPC failed and failOpen is set, and the
// score of a node the scorer did not answer for. Being equal on all nodes, it leaves the
// ranking to the other score plugins.
const NeutralScore int64 = 50

const (
	filterStateKey  fwk.StateKey = Name + "/filter"
	scoreStateKey   fwk.StateKey = Name + "/score"
	podInfoStateKey fwk.StateKey = Name + "/podinfo"
)

// Waterline implements the plugin. It holds no per-pod state of its own: everything a cycle
// needs is in that cycle's CycleState, so concurrent cycles (and preemption's clones of a
// cycle's state) never see each other's data.
//
// It deliberately does not implement fwk.SignPlugin: opportunistic batching reuses one pod's
// ranking for the next identical pod, but waterline's answer changes with every placement
// (the ledger), so the profile must not batch.
type Waterline struct {
	client   waterlinev1.ScorerServiceClient
	timeout  time.Duration
	failOpen bool
	// policy is the scorer's policy this profile asks for (args `policy`); "" the default.
	policy string
	// failureLog throttles the error line written when an RPC fails: with the scorer down
	// every pod fails, and hundreds of identical lines a second would drown the
	// scheduler's own logs. The counters still count every failure.
	failureLog *rate.Sometimes
	// session is the one Session stream, opened on first use; nil with `session: false`
	// (the unary RPCs only).
	session *session
	// roundTrips counts the calls the scheduler waited on the scorer for: an Evaluate on
	// the stream, or a unary RPC. Reserves written to the stream do not count.
	roundTrips atomic.Int64
}

var (
	_ fwk.PreFilterPlugin = (*Waterline)(nil)
	_ fwk.FilterPlugin    = (*Waterline)(nil)
	_ fwk.PreScorePlugin  = (*Waterline)(nil)
	_ fwk.ScorePlugin     = (*Waterline)(nil)
	_ fwk.ScoreExtensions = (*Waterline)(nil)
	_ fwk.ReservePlugin   = (*Waterline)(nil)
)

// New is the plugin factory for app.WithPlugin. The framework calls it once per profile
// that enables the plugin; the connection made here is shared by every scheduling cycle of
// that profile and closed when the scheduler's context ends.
func New(ctx context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	return newPlugin(ctx, obj)
}

// newPlugin is New with extra dial options, which tests use to reach an in-process server.
func newPlugin(ctx context.Context, obj runtime.Object, dialOpts ...grpc.DialOption) (*Waterline, error) {
	cfg, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	conn, err := dial(cfg, dialOpts...)
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		_ = conn.Close()
	}()
	registerMetrics()
	klog.FromContext(ctx).Info("Waterline plugin connecting to scorer",
		"endpoint", cfg.endpoint, "timeout", cfg.timeout, "failOpen", cfg.failOpen, "session", cfg.session, "policy", cfg.policy, "tls", cfg.tls != nil)
	pl := &Waterline{
		client:     waterlinev1.NewScorerServiceClient(conn),
		timeout:    cfg.timeout,
		failOpen:   cfg.failOpen,
		policy:     cfg.policy,
		failureLog: &rate.Sometimes{Interval: 10 * time.Second},
	}
	if cfg.session {
		pl.session = newSession(ctx, pl.client, &pl.roundTrips, pl.replayUnary)
	}
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *Waterline) Name() string { return Name }

// filterState is the Filter RPC's answer for one cycle. It is never modified in place
// (RemovePod/AddPod write a new one into their, cloned, CycleState), so Clone can share it.
type filterState struct {
	// rejected maps a rejected node to the scorer's reason.
	rejected map[string]string
	// evicted holds the "<ns>/<name>" of pods preemption's dry run has removed; an
	// anti-colocation rejection whose every peer is among them no longer holds.
	evicted sets.Set[string]
}

// holds reports whether the scorer's rejection of node still holds, and why.
func (s *filterState) holds(node string) (string, bool) {
	reason, out := s.rejected[node]
	if !out || s.evicted.Len() == 0 {
		return reason, out
	}
	peers, ok := colocationPeers(reason)
	return reason, !ok || !s.evicted.HasAll(peers...)
}

// withEvicted is a copy of s with pod removed from (evicted true) or put back on the node.
func (s *filterState) withEvicted(pod *v1.Pod, evicted bool) *filterState {
	next := &filterState{rejected: s.rejected, evicted: s.evicted.Clone()}
	if next.evicted == nil {
		next.evicted = sets.New[string]()
	}
	key := pod.Namespace + "/" + pod.Name
	if evicted {
		next.evicted.Insert(key)
	} else {
		next.evicted.Delete(key)
	}
	return next
}

func (s *filterState) Clone() fwk.StateData { return s }

// scoreState is one cycle's scores (read-only once written): the Evaluate's answer, written
// by PreFilter, or the Score RPC's, written by PreScore (unary fallback). Empty after a
// failed call with failOpen: every node gets NeutralScore.
type scoreState struct {
	// evaluation is the Evaluate's answer (by node table index).
	evaluation *evaluation
	// scores is the Score RPC's answer.
	scores map[string]int64
}

// score is the node's score in this cycle.
func (s *scoreState) score(node string) int64 {
	if s.evaluation != nil {
		return s.evaluation.score(node)
	}
	if score, found := s.scores[node]; found {
		return score
	}
	return NeutralScore
}

func (s *scoreState) Clone() fwk.StateData { return s }

// podInfoState caches the pod's PodInfo for the rest of the cycle (read-only).
type podInfoState struct {
	info *waterlinev1.PodInfo
}

func (s *podInfoState) Clone() fwk.StateData { return s }

// PreFilter makes the cycle's one call: an Evaluate on the Session stream, which judges and
// scores every node of the scorer's snapshot for the pod (no names sent: the answer refers
// to the scorer's node table, which crosses the stream once per generation). It narrows the
// cycle to the feasible nodes and keeps the scores in CycleState for Score. A node the
// scorer does not know is never rejected and scores the answer's unknown_node_score.
func (pl *Waterline) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if pl.session == nil {
		return pl.preFilterUnary(ctx, state, pod, nodes)
	}
	rpcCtx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	start := time.Now()
	ev, err := pl.session.evaluate(rpcCtx, pl.podInfo(state, pod), pl.policy)
	if errors.Is(err, errSessionUnsupported) {
		return pl.preFilterUnary(ctx, state, pod, nodes)
	}
	rpcDuration.WithLabelValues("Evaluate").Observe(time.Since(start).Seconds())
	if err != nil {
		if pl.failOpen {
			pl.recordFailOpen(ctx, "Evaluate", pod, err)
			// No scores: Score answers NeutralScore for every node (and PreScore must not
			// call out). Skipping the plugin's Filter lets every node pass.
			state.Write(scoreStateKey, &scoreState{})
			return nil, fwk.NewStatus(fwk.Skip)
		}
		countError("Evaluate", err)
		return nil, fwk.AsStatus(fmt.Errorf("waterline Evaluate: %w", err))
	}
	state.Write(scoreStateKey, &scoreState{evaluation: ev})
	if bypassesLoadFilters(pod) {
		// Scored (and reserved) like any pod, but never filtered: a node's own agents must
		// land whatever its load. Skip also turns off this plugin's Filter for the cycle.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return pl.narrow(ctx, state, pod, nodes, ev.rejected)
}

// preFilterUnary is PreFilter against a scorer without Session (or with `session: false`): one Filter RPC with
// all_nodes (the scorer judges every node it knows and answers with the rejected ones only);
// PreScore then asks for the scores.
func (pl *Waterline) preFilterUnary(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if bypassesLoadFilters(pod) {
		// Skip also turns off this plugin's Filter for the cycle.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	rpcCtx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	start := time.Now()
	pl.roundTrips.Add(1)
	resp, err := pl.client.Filter(rpcCtx, &waterlinev1.FilterRequest{Pod: pl.podInfo(state, pod), AllNodes: true, Policy: pl.policy})
	rpcDuration.WithLabelValues("Filter").Observe(time.Since(start).Seconds())
	if err != nil {
		if pl.failOpen {
			pl.recordFailOpen(ctx, "Filter", pod, err)
			// Skipping the plugin lets every node pass.
			return nil, fwk.NewStatus(fwk.Skip)
		}
		countError("Filter", err)
		return nil, fwk.AsStatus(fmt.Errorf("waterline Filter RPC: %w", err))
	}
	return pl.narrow(ctx, state, pod, nodes, resp.GetRejected())
}

// narrow keeps the scorer's rejections in CycleState for Filter and returns the cycle's
// nodes the scorer did not reject (for its load).
func (pl *Waterline) narrow(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, rejected map[string]string) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(filterStateKey, &filterState{rejected: rejected})
	if len(rejected) == 0 {
		// Everything fits: nil means "all nodes", which spares the framework a set of them.
		return nil, nil
	}
	// The feasible set is every node of this cycle the scorer did not reject (its answer
	// may also name nodes the scheduler does not have, which simply drop out). Nodes left
	// out are UnschedulableAndUnresolvable to the framework: right for a load rejection,
	// which evicting pods cannot lower within the cycle. A node rejected only for
	// anti-colocation stays in, so that Filter answers Unschedulable for it and preemption
	// may evict the other pod of the group (RemovePod).
	feasible := make(sets.Set[string], max(len(nodes)-len(rejected), 0))
	resolvable := 0
	for _, n := range nodes {
		node := n.Node()
		if node == nil {
			continue
		}
		reason, out := rejected[node.Name]
		if !out {
			feasible.Insert(node.Name)
		} else if evictionMayResolve(reason) {
			feasible.Insert(node.Name)
			resolvable++
		}
	}
	if logger := klog.FromContext(ctx); logger.V(4).Enabled() {
		logger.V(4).Info("Waterline filtered nodes", "pod", klog.KObj(pod),
			"feasible", feasible.Len()-resolvable, "rejected", len(rejected), "antiColocation", resolvable)
	}
	if feasible.Len() == 0 {
		// Nodes outside a PreFilterResult get a generic "didn't satisfy plugin" status, so
		// when nothing is left (not even a node preemption could free of an anti-colocation
		// peer), say why here: this message ends up in the pod's FailedScheduling event.
		// Unresolvable because evicting pods does not lower the measured load within this
		// cycle, so preemption could not help.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, summarize(rejected))
	}
	return &fwk.PreFilterResult{NodeNames: feasible}, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin. The load verdicts do not depend on
// the pods the scheduler adds or removes while simulating preemption; an anti-colocation
// verdict does: it no longer holds once the pod it names is removed.
func (pl *Waterline) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// RemovePod implements fwk.PreFilterExtensions: preemption's dry run evicts podInfoToRemove.
// State is the dry run's clone, so the new filterState stays in it.
func (pl *Waterline) RemovePod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfoToRemove fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	if s, ok := readState[*filterState](state, filterStateKey); ok && len(s.rejected) > 0 {
		state.Write(filterStateKey, s.withEvicted(podInfoToRemove.GetPod(), true))
	}
	return nil
}

// AddPod implements fwk.PreFilterExtensions: a pod put back (a reprieved victim) brings its
// conflict back. A nominated pod the scorer has not seen is not judged here (the plugin
// does not know the policy's rules); the next cycle's Filter RPC sees it in the ledger.
func (pl *Waterline) AddPod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfoToAdd fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	if s, ok := readState[*filterState](state, filterStateKey); ok && s.evicted.Len() > 0 {
		state.Write(filterStateKey, s.withEvicted(podInfoToAdd.GetPod(), false))
	}
	return nil
}

// Filter reports the scorer's reason for a rejected node. Nodes outside the PreFilterResult
// normally never reach Filter, but the scheduler does run Filter directly on a pod's
// nominated node (after preemption) and during preemption's dry runs; there the RPC's
// verdict must hold too.
func (pl *Waterline) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, ok := readState[*filterState](state, filterStateKey)
	if !ok {
		return nil
	}
	if reason, out := s.holds(nodeInfo.Node().Name); out {
		return fwk.NewStatus(fwk.Unschedulable, eventSafe(reason))
	}
	return nil
}

// PreScore has nothing to do when PreFilter's Evaluate brought the scores (or failed open).
// Against a scorer without Session it sends the feasible nodes in one Score RPC.
func (pl *Waterline) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if _, ok := readState[*scoreState](state, scoreStateKey); ok {
		return nil
	}
	rpcCtx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	start := time.Now()
	names := nodeNames(nodes)
	pl.roundTrips.Add(1)
	// scores_only: the answer is one bare score per name in this order, so neither side
	// encodes, decodes or allocates the names a second time (5,000 per pod at 5,000 nodes).
	resp, err := pl.client.Score(rpcCtx, &waterlinev1.ScoreRequest{Pod: pl.podInfo(state, pod), NodeNames: names, ScoresOnly: true, Policy: pl.policy})
	rpcDuration.WithLabelValues("Score").Observe(time.Since(start).Seconds())
	if err != nil {
		if pl.failOpen {
			pl.recordFailOpen(ctx, "Score", pod, err)
			// No scores in the state: Score answers NeutralScore for every node.
			state.Write(scoreStateKey, &scoreState{})
			return nil
		}
		countError("Score", err)
		return fwk.AsStatus(fmt.Errorf("waterline Score RPC: %w", err))
	}
	scores := make(map[string]int64, len(names))
	if ordered := resp.GetOrderedScores(); len(ordered) == len(names) {
		for i, n := range names {
			scores[n] = int64(ordered[i])
		}
	} else {
		// A scorer older than scores_only (the two deploy independently) answers by name.
		for _, s := range resp.GetScores() {
			scores[s.GetNodeName()] = int64(s.GetScore())
		}
	}
	state.Write(scoreStateKey, &scoreState{scores: scores})
	return nil
}

// Score returns the node's score from PreFilter's Evaluate (or PreScore's Score RPC).
func (pl *Waterline) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, ok := readState[*scoreState](state, scoreStateKey)
	if !ok {
		return NeutralScore, nil
	}
	return s.score(nodeInfo.Node().Name), nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *Waterline) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore keeps the scorer's 0..100 as it is (it already is on the framework's
// scale, which is the point of the plugin over the extender's 0..10) and only clamps, so a
// misbehaving scorer cannot outweigh every other plugin.
func (pl *Waterline) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	for i := range scores {
		scores[i].Score = max(fwk.MinScore, min(fwk.MaxScore, scores[i].Score))
	}
	return nil
}

// Reserve tells the scorer (and through it the collector's ledger) where the pod goes, at
// the moment the scheduler decides and before the bind. The next pod's Evaluate then
// already counts this one, even though no metric shows it yet. On the Session stream the
// Reserve is written and not waited for: the scorer reads it before the next Evaluate, and
// it is kept until acknowledged (replayed on a reopened stream), so it never fails the cycle.
func (pl *Waterline) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	info := pl.podInfo(state, pod)
	if pl.session != nil && pl.session.reserve(info, nodeName) {
		return nil
	}
	rpcCtx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	start := time.Now()
	pl.roundTrips.Add(1)
	_, err := pl.client.Reserve(rpcCtx, &waterlinev1.ReserveRequest{Pod: info, NodeName: nodeName})
	rpcDuration.WithLabelValues("Reserve").Observe(time.Since(start).Seconds())
	if err != nil {
		if pl.failOpen {
			// The placement still reaches the ledger later through the collector's pod watch.
			pl.recordFailOpen(ctx, "Reserve", pod, err)
			return nil
		}
		countError("Reserve", err)
		return fwk.AsStatus(fmt.Errorf("waterline Reserve RPC: %w", err))
	}
	return nil
}

// Unreserve withdraws the placement after a later phase (Permit, PreBind, Bind) failed.
func (pl *Waterline) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	info := pl.podInfo(state, pod)
	if pl.session != nil && pl.session.unreserve(info, nodeName) {
		return
	}
	pl.unaryUnreserve(ctx, info, nodeName)
}

func (pl *Waterline) unaryUnreserve(ctx context.Context, info *waterlinev1.PodInfo, nodeName string) {
	// Unreserve often runs because the cycle or binding was cancelled; the ledger must still
	// drop the entry, so the RPC gets its own deadline instead of inheriting the cancellation.
	rpcCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pl.timeout)
	defer cancel()
	start := time.Now()
	pl.roundTrips.Add(1)
	_, err := pl.client.Unreserve(rpcCtx, &waterlinev1.UnreserveRequest{Pod: info, NodeName: nodeName})
	rpcDuration.WithLabelValues("Unreserve").Observe(time.Since(start).Seconds())
	if err != nil {
		// Nothing to fall back to; the entry ages out of the ledger, and the pod watch
		// removes it when the pod is deleted or bound elsewhere.
		countError("Unreserve", err)
		klog.FromContext(ctx).Error(err, "Waterline Unreserve RPC failed", "pod", klog.KRef(info.GetNamespace(), info.GetName()), "node", nodeName)
	}
}

// replayUnary sends, in order and with the unary RPCs, the Reserves and Unreserves written
// to a stream that the scorer then answered with UNIMPLEMENTED.
func (pl *Waterline) replayUnary(ops []pendingOp) {
	ctx := pl.session.ctx
	for _, op := range ops {
		rpcCtx, cancel := context.WithTimeout(ctx, pl.timeout)
		var err error
		switch m := op.msg.GetMessage().(type) {
		case *waterlinev1.SessionRequest_Reserve:
			_, err = pl.client.Reserve(rpcCtx, &waterlinev1.ReserveRequest{Pod: m.Reserve.GetPod(), NodeName: m.Reserve.GetNodeName()})
		case *waterlinev1.SessionRequest_Unreserve:
			_, err = pl.client.Unreserve(rpcCtx, &waterlinev1.UnreserveRequest{Pod: m.Unreserve.GetPod(), NodeName: m.Unreserve.GetNodeName()})
		}
		cancel()
		if err != nil {
			countError(op.rpc, err)
			klog.FromContext(ctx).V(4).Info("Waterline replay of a session message over the unary RPC failed", "rpc", op.rpc, "err", err)
		}
	}
}

// podInfo converts the pod once per cycle and keeps the result in the cycle's state.
func (pl *Waterline) podInfo(state fwk.CycleState, pod *v1.Pod) *waterlinev1.PodInfo {
	if s, ok := readState[*podInfoState](state, podInfoStateKey); ok {
		return s.info
	}
	info := toPodInfo(pod)
	state.Write(podInfoStateKey, &podInfoState{info: info})
	return info
}

func (pl *Waterline) recordFailOpen(ctx context.Context, rpc string, pod *v1.Pod, err error) {
	countError(rpc, err)
	failOpens.WithLabelValues(rpc).Inc()
	logger := klog.FromContext(ctx)
	pl.failureLog.Do(func() {
		logger.Error(err, "Waterline RPC failed; failing open (all nodes pass, equal scores); further failures are logged at most every 10s",
			"rpc", rpc, "pod", klog.KObj(pod))
	})
	logger.V(4).Info("Waterline RPC failed; failing open", "rpc", rpc, "pod", klog.KObj(pod), "err", err)
}

// readState returns the cycle's value under key, if PreFilter or PreScore wrote one.
func readState[T fwk.StateData](state fwk.CycleState, key fwk.StateKey) (T, bool) {
	var zero T
	data, err := state.Read(key)
	if err != nil {
		return zero, false
	}
	v, ok := data.(T)
	return v, ok
}

func nodeNames(nodes []fwk.NodeInfo) []string {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if node := n.Node(); node != nil {
			names = append(names, node.Name)
		}
	}
	return names
}

// summarize turns the scorer's reasons into one event-sized message when every node was
// rejected: how many nodes, and a few distinct reasons with an example node each.
func summarize(rejected map[string]string) string {
	const maxReasons = 3
	byReason := map[string]string{}
	for node, reason := range rejected {
		if prev, seen := byReason[reason]; !seen || node < prev {
			byReason[reason] = node
		}
	}
	reasons := sets.List(sets.KeySet(byReason))
	var b strings.Builder
	fmt.Fprintf(&b, "waterline rejected all %d node(s)", len(rejected))
	for i, r := range reasons {
		if i == maxReasons {
			fmt.Fprintf(&b, "; and %d more reason(s)", len(reasons)-maxReasons)
			break
		}
		fmt.Fprintf(&b, "; %s: %s", byReason[r], r)
	}
	return eventSafe(b.String())
}

// eventSafe spells out '%' in a status message. kube-scheduler passes the message of a
// failed cycle to the event recorder's Eventf as the *format* string, so the scorer's
// "cpu_usage_avg_5m 91.1% > 65%" would reach the pod's FailedScheduling event as
// "91.1%!>(MISSING) 65%!(MISSING)" (found by the end-to-end suite). The extender does the
// same for its FailedNodes reasons.
func eventSafe(msg string) string {
	if !strings.Contains(msg, "%") {
		return msg
	}
	return strings.ReplaceAll(msg, "%", " percent")
}

// evictionMayResolve reports whether evicting pods could make a rejected node acceptable:
// only when every part of the scorer's reason is an anti-colocation conflict ("anti-colocation
// <key>=<value> with <ns>/<pod>"), which leaves with the other pod. A load rejection does
// not: the measured load does not drop within the scheduling cycle. The extender makes the
// same split (FailedNodes vs FailedAndUnresolvableNodes, extender/src/mapping.rs).
func evictionMayResolve(reason string) bool {
	_, ok := colocationPeers(reason)
	return ok
}

// colocationPeers returns the "<ns>/<pod>" each part of an anti-colocation-only reason
// names, and false when any part is something else.
func colocationPeers(reason string) ([]string, bool) {
	var peers []string
	for _, part := range strings.Split(reason, "; ") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.HasPrefix(part, "anti-colocation ") {
			return nil, false
		}
		if i := strings.LastIndex(part, " with "); i >= 0 {
			peers = append(peers, part[i+len(" with "):])
		} else {
			peers = append(peers, "")
		}
	}
	return peers, len(peers) > 0
}
