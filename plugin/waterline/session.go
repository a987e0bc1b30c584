package waterline

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// The plugin's one ScorerService.Session stream (proto/waterline/v1/scorer.proto):
//
//   - PreFilter writes a SessionEvaluate and waits, within the plugin's timeout, for the
//     SessionEvaluation with its request id: the one blocking call of a scheduling cycle.
//   - Reserve and Unreserve write their message and return. Each carries a sequence number
//     and stays in `unacked` until a SessionAck covers it; a stream that breaks is reopened
//     (with backoff) and the unacknowledged messages are written first, in order (the
//     scorer applies them idempotently by pod uid).
//   - The scorer handles the messages of a stream one by one in the order they were
//     written, so a Reserve written before the next pod's Evaluate is in the scorer's
//     ledger when that Evaluate is answered: the order comes from the stream, not from
//     waiting.
//
// A stream has two goroutines: a writer, which opens the stream and then writes the queued
// messages in order (so no caller ever blocks on gRPC flow control or on the connection),
// and a reader, which dispatches answers to the waiting Evaluate by request id, keeps the
// node table and drops acknowledged messages. All shared state is under session.mu.
const (
	// sessionBackoffMin and sessionBackoffMax bound the wait before a broken stream is
	// reopened (doubling, ±20 % jitter, back to the minimum after an answer arrives).
	// Cycles in the meantime fail open at once instead of each waiting for the timeout.
	sessionBackoffMin = 100 * time.Millisecond
	sessionBackoffMax = 5 * time.Second
	// sessionMaxOverdue Evaluates in a row left unanswered within the timeout abandon the
	// stream: the scorer answers in order, so behind a stuck or very slow one every later
	// answer would queue up too. The next use reopens it.
	sessionMaxOverdue = 3
	// sessionMaxUnacked bounds the Reserves/Unreserves kept for replay while the scorer is
	// unreachable; past it the oldest is dropped (counted; the collector's pod watch still
	// learns the placement from the bind).
	sessionMaxUnacked = 10000
	// sessionReprobe is how long the plugin uses the unary RPCs after a scorer answered
	// Session with UNIMPLEMENTED (an older scorer) before trying Session again.
	sessionReprobe = time.Minute
)

// errSessionUnsupported says the scorer does not serve Session: use the unary RPCs.
var errSessionUnsupported = errors.New("the scorer does not serve Session")

// nodeTable is a NodeTable the scorer sent: answers on the stream name nodes by index in it.
// Immutable once built; cycles keep a pointer to it in their CycleState.
type nodeTable struct {
	generation uint64
	names      []string
	index      map[string]int32
}

// emptyTable is the table of a stream before the scorer sent one (generation 0, which is
// also the scorer's generation before its first snapshot).
var emptyTable = &nodeTable{}

func newNodeTable(t *waterlinev1.NodeTable) *nodeTable {
	names := t.GetNodeNames()
	index := make(map[string]int32, len(names))
	for i, n := range names {
		index[n] = int32(i)
	}
	return &nodeTable{generation: t.GetGeneration(), names: names, index: index}
}

// evaluation is one SessionEvaluation resolved against its node table.
type evaluation struct {
	table *nodeTable
	// scores[i] is the score of table.names[i], -1 when rejected.
	scores []int32
	// rejected maps a rejected node's name to the scorer's reason.
	rejected map[string]string
	// unknownScore is what a node outside the table scores (it is never rejected).
	unknownScore int64
}

// score is the evaluation's score for a node.
func (e *evaluation) score(node string) int64 {
	i, ok := e.table.index[node]
	if !ok {
		return e.unknownScore
	}
	// -1 marks a rejected node; such a node only reaches Score if a rejection was lifted
	// (it never is within a scheduled cycle), and then it is the worst.
	return max(int64(e.scores[i]), fwk.MinScore)
}

type evalResult struct {
	answer *waterlinev1.SessionEvaluation
	table  *nodeTable
	err    error
}

// pendingOp is a Reserve or Unreserve written (or to be written) and not yet acknowledged.
type pendingOp struct {
	sequence uint64
	rpc      string // "Reserve" or "Unreserve", for metrics and the unary fallback
	msg      *waterlinev1.SessionRequest
}

type session struct {
	client waterlinev1.ScorerServiceClient
	// ctx is the plugin's lifetime; every stream's context derives from it.
	ctx    context.Context
	logger klog.Logger
	// roundTrips counts the calls a scheduling cycle waited on (shared with the plugin).
	roundTrips *atomic.Int64
	// unary sends Reserves/Unreserves written to a stream that the scorer answered with
	// UNIMPLEMENTED through the unary RPCs, in order.
	unary func([]pendingOp)
	// brokenLog throttles the line written when a stream breaks.
	brokenLog *rate.Sometimes

	mu      sync.Mutex
	cur     *sessionStream // nil when no stream is open
	nextID  uint64         // last Evaluate request id
	nextSeq uint64         // last Reserve/Unreserve sequence number
	unacked []pendingOp    // in sequence order
	// backoff is the last wait before a reopen; retryAt is when the next may start.
	backoff time.Duration
	retryAt time.Time
	lastErr error
	// overdue counts Evaluates in a row not answered within the timeout.
	overdue int
	// unaryUntil is set when the scorer answered UNIMPLEMENTED.
	unaryUntil time.Time
	opened     int // streams opened so far
}

// sessionStream is one opened (or opening) Session stream.
type sessionStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	// Guarded by session.mu:
	queue   []*waterlinev1.SessionRequest
	pending map[uint64]chan evalResult
	table   *nodeTable
	done    bool
}

func newSession(ctx context.Context, client waterlinev1.ScorerServiceClient, roundTrips *atomic.Int64, unary func([]pendingOp)) *session {
	return &session{
		client:     client,
		ctx:        ctx,
		logger:     klog.FromContext(ctx),
		roundTrips: roundTrips,
		unary:      unary,
		brokenLog:  &rate.Sometimes{Interval: 10 * time.Second},
	}
}

// unsupportedLocked reports whether the unary RPCs are to be used for now.
func (s *session) unsupportedLocked() bool {
	return time.Now().Before(s.unaryUntil)
}

// evaluate asks the scorer about every node for one pod and waits for the answer until ctx
// ends. errSessionUnsupported means: ask with the unary RPCs instead.
func (s *session) evaluate(ctx context.Context, pod *waterlinev1.PodInfo, policy string) (*evaluation, error) {
	s.mu.Lock()
	if s.unsupportedLocked() {
		s.mu.Unlock()
		return nil, errSessionUnsupported
	}
	st := s.streamLocked()
	if st == nil {
		err := s.downErrLocked()
		s.mu.Unlock()
		return nil, err
	}
	s.nextID++
	id := s.nextID
	answer := make(chan evalResult, 1)
	st.pending[id] = answer
	generation := uint64(0)
	if st.table != nil {
		generation = st.table.generation
	}
	st.enqueueLocked(&waterlinev1.SessionRequest{Message: &waterlinev1.SessionRequest_Evaluate{
		Evaluate: &waterlinev1.SessionEvaluate{RequestId: id, Pod: pod, NodeTableGeneration: generation, Policy: policy},
	}})
	s.mu.Unlock()
	s.roundTrips.Add(1)

	select {
	case r := <-answer:
		if r.err != nil {
			if status.Code(r.err) == codes.Unimplemented {
				return nil, errSessionUnsupported
			}
			return nil, r.err
		}
		return resolve(r.answer, r.table)
	case <-ctx.Done():
		s.mu.Lock()
		delete(st.pending, id)
		s.overdue++
		if s.overdue >= sessionMaxOverdue {
			s.breakLocked(st, status.Errorf(codes.DeadlineExceeded,
				"%d Evaluate answers in a row overdue; abandoning the stream", s.overdue))
		}
		s.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// resolve turns an answer into names through its node table.
func resolve(ev *waterlinev1.SessionEvaluation, table *nodeTable) (*evaluation, error) {
	if msg := ev.GetError(); msg != "" {
		// The field carries no code. The scorer sends it for a pod it cannot evaluate and
		// while it waits for its first snapshot (UNAVAILABLE on the unary RPCs).
		code := codes.InvalidArgument
		if strings.HasPrefix(msg, "waiting for the first snapshot") {
			code = codes.Unavailable
		}
		return nil, status.Error(code, msg)
	}
	scores := ev.GetScores()
	if len(scores) != len(table.names) {
		return nil, status.Errorf(codes.Internal, "the answer holds %d scores for a node table of %d", len(scores), len(table.names))
	}
	indexes, reasons := ev.GetRejectedIndexes(), ev.GetRejectedReasons()
	if len(indexes) != len(reasons) {
		return nil, status.Errorf(codes.Internal, "the answer holds %d rejected indexes and %d reasons", len(indexes), len(reasons))
	}
	rejected := make(map[string]string, len(indexes))
	for i, idx := range indexes {
		if int(idx) >= len(table.names) {
			return nil, status.Errorf(codes.Internal, "rejected index %d outside the node table of %d", idx, len(table.names))
		}
		rejected[table.names[idx]] = reasons[i]
	}
	return &evaluation{table: table, scores: scores, rejected: rejected, unknownScore: int64(ev.GetUnknownNodeScore())}, nil
}

// reserve writes a Reserve without waiting; false means: use the unary RPC.
func (s *session) reserve(pod *waterlinev1.PodInfo, node string) bool {
	return s.write("Reserve", func(seq uint64) *waterlinev1.SessionRequest {
		return &waterlinev1.SessionRequest{Message: &waterlinev1.SessionRequest_Reserve{
			Reserve: &waterlinev1.SessionReserve{Sequence: seq, Pod: pod, NodeName: node},
		}}
	})
}

// unreserve writes an Unreserve without waiting; false means: use the unary RPC.
func (s *session) unreserve(pod *waterlinev1.PodInfo, node string) bool {
	return s.write("Unreserve", func(seq uint64) *waterlinev1.SessionRequest {
		return &waterlinev1.SessionRequest{Message: &waterlinev1.SessionRequest_Unreserve{
			Unreserve: &waterlinev1.SessionUnreserve{Sequence: seq, Pod: pod, NodeName: node},
		}}
	})
}

func (s *session) write(rpc string, build func(seq uint64) *waterlinev1.SessionRequest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsupportedLocked() {
		return false
	}
	s.nextSeq++
	op := pendingOp{sequence: s.nextSeq, rpc: rpc, msg: build(s.nextSeq)}
	s.unacked = append(s.unacked, op)
	if len(s.unacked) > sessionMaxUnacked {
		dropped := s.unacked[0]
		s.unacked = append(s.unacked[:0], s.unacked[1:]...)
		rpcErrors.WithLabelValues(dropped.rpc, codes.ResourceExhausted.String()).Inc()
	}
	// With no stream (backing off) the message waits in unacked for the reopen.
	if st := s.streamLocked(); st != nil {
		st.enqueueLocked(op.msg)
	}
	return true
}

// streamLocked returns the open stream, opening one unless the last broke too recently.
func (s *session) streamLocked() *sessionStream {
	if s.cur != nil {
		return s.cur
	}
	if s.ctx.Err() != nil || time.Now().Before(s.retryAt) {
		return nil
	}
	ctx, cancel := context.WithCancel(s.ctx)
	st := &sessionStream{
		ctx:     ctx,
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		pending: map[uint64]chan evalResult{},
	}
	// Replay first, in order: the scorer may not have applied them (or this may be another
	// replica); applying one twice is harmless (idempotent by pod uid).
	for _, op := range s.unacked {
		st.queue = append(st.queue, op.msg)
	}
	s.cur = st
	s.opened++
	if s.opened > 1 {
		s.logger.V(2).Info("Waterline session stream reopening", "replaying", len(s.unacked))
	}
	go s.run(st)
	return st
}

// downErrLocked is the error of an Evaluate asked while the stream waits to be reopened.
func (s *session) downErrLocked() error {
	code, msg := codes.Unavailable, "plugin stopping"
	if s.lastErr != nil {
		code, msg = status.Code(s.lastErr), status.Convert(s.lastErr).Message()
	}
	return status.Errorf(code, "session stream down, reopening in %v (last error: %s)",
		time.Until(s.retryAt).Round(time.Millisecond), msg)
}

func (st *sessionStream) enqueueLocked(msg *waterlinev1.SessionRequest) {
	st.queue = append(st.queue, msg)
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// run is the stream's writer: it opens the stream, starts the reader, and writes the
// queued messages in order until the stream ends.
func (s *session) run(st *sessionStream) {
	stream, err := s.client.Session(st.ctx)
	if err != nil {
		s.mu.Lock()
		s.breakLocked(st, err)
		s.mu.Unlock()
		return
	}
	go s.read(st, stream)
	for {
		s.mu.Lock()
		batch, done := st.queue, st.done
		st.queue = nil
		s.mu.Unlock()
		if done {
			return
		}
		for _, msg := range batch {
			if err := stream.Send(msg); err != nil {
				// io.EOF: the stream has ended and its status is what Recv returns, which
				// the reader reports (UNIMPLEMENTED from an older scorer arrives this way).
				if !errors.Is(err, io.EOF) {
					s.mu.Lock()
					s.breakLocked(st, err)
					s.mu.Unlock()
				}
				return
			}
		}
		if len(batch) == 0 {
			select {
			case <-st.wake:
			case <-st.ctx.Done():
				return
			}
		}
	}
}

// read is the stream's reader: node tables, answers by request id, acknowledgements.
func (s *session) read(st *sessionStream, stream grpc.BidiStreamingClient[waterlinev1.SessionRequest, waterlinev1.SessionResponse]) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "the scorer ended the session stream")
			}
			s.mu.Lock()
			s.breakLocked(st, err)
			s.mu.Unlock()
			return
		}
		switch m := resp.GetMessage().(type) {
		case *waterlinev1.SessionResponse_NodeTable:
			table := newNodeTable(m.NodeTable)
			s.mu.Lock()
			st.table = table
			s.mu.Unlock()
		case *waterlinev1.SessionResponse_Evaluation:
			ev := m.Evaluation
			var result evalResult
			s.mu.Lock()
			answer, waiting := st.pending[ev.GetRequestId()]
			delete(st.pending, ev.GetRequestId())
			table := st.table
			if table == nil {
				table = emptyTable
			}
			if ev.GetNodeTableGeneration() != table.generation {
				// The scorer sends a table before any answer over another generation; if
				// that ever fails, ask for a fresh table with the next request.
				result.err = status.Errorf(codes.Internal, "the answer refers to node table generation %d, the plugin holds %d",
					ev.GetNodeTableGeneration(), table.generation)
				st.table = nil
			} else {
				result = evalResult{answer: ev, table: table}
				s.backoff = 0
				if waiting {
					s.overdue = 0
				}
			}
			s.mu.Unlock()
			if waiting {
				answer <- result
			}
		case *waterlinev1.SessionResponse_Ack:
			s.mu.Lock()
			s.ackLocked(m.Ack.GetUpToSequence())
			s.mu.Unlock()
		}
	}
}

// ackLocked drops the messages the scorer has applied.
func (s *session) ackLocked(upTo uint64) {
	n := 0
	for n < len(s.unacked) && s.unacked[n].sequence <= upTo {
		n++
	}
	if n > 0 {
		s.unacked = append(s.unacked[:0], s.unacked[n:]...)
	}
}

// breakLocked ends a stream once: the waiting Evaluates get err (their cycles fail open), and
// the next stream is opened after a backoff, at once by a timer when messages wait for
// replay, otherwise by the next use.
func (s *session) breakLocked(st *sessionStream, err error) {
	if st.done {
		return
	}
	st.done = true
	st.cancel()
	s.overdue = 0
	if s.cur == st {
		s.cur = nil
	}
	pending := st.pending
	st.pending = nil
	if s.ctx.Err() != nil {
		err = status.Error(codes.Canceled, "the plugin is stopping")
	}
	for _, answer := range pending {
		answer <- evalResult{err: err}
	}
	if s.ctx.Err() != nil {
		return
	}
	if status.Code(err) == codes.Unimplemented {
		s.unaryUntil = time.Now().Add(sessionReprobe)
		ops := s.unacked
		s.unacked = nil
		s.logger.Info("Waterline scorer does not serve Session (an older scorer); using the Filter, Score and Reserve RPCs",
			"retryIn", sessionReprobe, "replaying", len(ops))
		if len(ops) > 0 && s.unary != nil {
			go s.unary(ops)
		}
		return
	}
	countError("Session", err)
	s.backoff = min(max(2*s.backoff, sessionBackoffMin), sessionBackoffMax)
	wait := time.Duration(float64(s.backoff) * (0.8 + 0.4*rand.Float64()))
	s.retryAt = time.Now().Add(wait)
	s.lastErr = err
	if len(s.unacked) > 0 {
		time.AfterFunc(wait, s.reopen)
	}
	logger := s.logger
	s.brokenLog.Do(func() {
		logger.Error(err, "Waterline session stream broke; reopening with backoff (cycles meanwhile fail open); further breaks are logged at most every 10s",
			"backoff", wait.Round(time.Millisecond), "unacknowledged", len(s.unacked))
	})
	logger.V(4).Info("Waterline session stream broke", "err", err, "backoff", wait, "unacknowledged", len(s.unacked))
}

// reopen opens a stream for the messages waiting for replay.
func (s *session) reopen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil && len(s.unacked) > 0 && !s.unsupportedLocked() {
		s.streamLocked()
	}
}
