package waterline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// fakeScorer is an in-process ScorerService. Tests set reject and score to decide its
// answers and read back every request it received.
type fakeScorer struct {
	waterlinev1.UnimplementedScorerServiceServer

	// reject returns the reason a node is rejected, or "" when it is feasible.
	reject func(node string) string
	// nodes is the cluster as the fake's snapshot knows it: what an all_nodes Filter judges.
	nodes []string
	// score returns a node's score.
	score func(node string) int64
	// namesOnly makes the fake a scorer older than scores_only: it always answers by name.
	namesOnly bool
	// delay is applied to every RPC, and to every Evaluate on a Session, before answering
	// (to provoke client timeouts).
	delay time.Duration

	// noSession makes the fake a scorer older than Session: it answers UNIMPLEMENTED.
	noSession bool
	// generation is the fake's node table generation (nodes); 0 means 1.
	generation uint64
	// unknownScore is what the fake's evaluations say a node outside its table scores.
	unknownScore int32
	// dropAfter > 0: on the first Session stream, once that many messages are handled, the
	// fake ends the stream (UNAVAILABLE) when the next one arrives, without handling it.
	dropAfter int
	// noAcks: the fake never acknowledges Reserves/Unreserves.
	noAcks bool
	// evalError, when set, gives the error an Evaluate for the pod is answered with ("" for
	// none), as the scorer answers a pod it cannot evaluate.
	evalError func(pod *waterlinev1.PodInfo) string
	// reserveGate, when set, holds the handling of every session Reserve until it is closed.
	reserveGate chan struct{}

	mu        sync.Mutex
	filters   []*waterlinev1.FilterRequest
	scores    []*waterlinev1.ScoreRequest
	reserves  []*waterlinev1.ReserveRequest
	unreserve []*waterlinev1.UnreserveRequest
	// sessions counts Session streams opened (UNIMPLEMENTED ones included); handled is
	// every Session message the fake handled, in order.
	sessions int
	handled  []sessionMsg
}

// sessionMsg is one Session message as the fake handled it.
type sessionMsg struct {
	stream int    // 1 for the first stream opened
	kind   string // "evaluate", "reserve" or "unreserve"
	// id is the Evaluate's request id or the Reserve/Unreserve's sequence number.
	id   uint64
	node string // Reserve/Unreserve
	pod  *waterlinev1.PodInfo
	// generation is the node table generation the client said it holds (Evaluate).
	generation uint64
	// policy is the scorer policy the Evaluate asked for.
	policy string
}

func (m sessionMsg) String() string {
	if m.kind == "evaluate" {
		return fmt.Sprintf("%d:evaluate#%d(%s)", m.stream, m.id, m.pod.GetName())
	}
	return fmt.Sprintf("%d:%s#%d(%s->%s)", m.stream, m.kind, m.id, m.pod.GetName(), m.node)
}

func (f *fakeScorer) tableGeneration() uint64 {
	if f.generation == 0 {
		return 1
	}
	return f.generation
}

// Session serves the stream like the scorer (scorer/src/session.rs): messages one at a time
// in order; a NodeTable before an answer when the client's generation differs; answers by
// table index; Reserves/Unreserves unanswered, acknowledged before the next answer.
func (f *fakeScorer) Session(srv grpc.BidiStreamingServer[waterlinev1.SessionRequest, waterlinev1.SessionResponse]) error {
	f.mu.Lock()
	f.sessions++
	stream := f.sessions
	f.mu.Unlock()
	if f.noSession {
		return status.Error(codes.Unimplemented, "method Session not implemented")
	}
	var handled, maxSeq, acked uint64
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if stream == 1 && f.dropAfter > 0 && handled == uint64(f.dropAfter) {
			return status.Error(codes.Unavailable, "fake scorer dropped the stream")
		}
		handled++
		msg := sessionMsg{stream: stream}
		switch m := req.GetMessage().(type) {
		case *waterlinev1.SessionRequest_Reserve:
			if f.reserveGate != nil {
				select {
				case <-f.reserveGate:
				case <-srv.Context().Done():
					return srv.Context().Err()
				}
			}
			msg.kind, msg.id, msg.node, msg.pod = "reserve", m.Reserve.GetSequence(), m.Reserve.GetNodeName(), m.Reserve.GetPod()
			maxSeq = max(maxSeq, msg.id)
		case *waterlinev1.SessionRequest_Unreserve:
			msg.kind, msg.id, msg.node, msg.pod = "unreserve", m.Unreserve.GetSequence(), m.Unreserve.GetNodeName(), m.Unreserve.GetPod()
			maxSeq = max(maxSeq, msg.id)
		case *waterlinev1.SessionRequest_Evaluate:
			e := m.Evaluate
			msg.kind, msg.id, msg.pod, msg.generation, msg.policy = "evaluate", e.GetRequestId(), e.GetPod(), e.GetNodeTableGeneration(), e.GetPolicy()
		default:
			return status.Error(codes.InvalidArgument, "empty session message")
		}
		f.mu.Lock()
		f.handled = append(f.handled, msg)
		f.mu.Unlock()
		if msg.kind != "evaluate" {
			continue
		}
		if err := f.wait(srv.Context()); err != nil {
			return err
		}
		if !f.noAcks && maxSeq > acked {
			acked = maxSeq
			if err := srv.Send(&waterlinev1.SessionResponse{Message: &waterlinev1.SessionResponse_Ack{Ack: &waterlinev1.SessionAck{UpToSequence: acked}}}); err != nil {
				return err
			}
		}
		for _, out := range f.evaluate(msg) {
			if err := srv.Send(out); err != nil {
				return err
			}
		}
	}
}

func (f *fakeScorer) evaluate(msg sessionMsg) []*waterlinev1.SessionResponse {
	var out []*waterlinev1.SessionResponse
	gen := f.tableGeneration()
	if msg.generation != gen {
		out = append(out, &waterlinev1.SessionResponse{Message: &waterlinev1.SessionResponse_NodeTable{
			NodeTable: &waterlinev1.NodeTable{Generation: gen, NodeNames: f.nodes},
		}})
	}
	ev := &waterlinev1.SessionEvaluation{RequestId: msg.id, NodeTableGeneration: gen, UnknownNodeScore: f.unknownScore}
	if f.evalError != nil {
		if ev.Error = f.evalError(msg.pod); ev.Error != "" {
			return append(out, &waterlinev1.SessionResponse{Message: &waterlinev1.SessionResponse_Evaluation{Evaluation: ev}})
		}
	}
	for i, n := range f.nodes {
		if reason := f.rejectReason(n); reason != "" {
			ev.Scores = append(ev.Scores, -1)
			ev.RejectedIndexes = append(ev.RejectedIndexes, uint32(i))
			ev.RejectedReasons = append(ev.RejectedReasons, reason)
			continue
		}
		s := int64(0)
		if f.score != nil {
			s = f.score(n)
		}
		ev.Scores = append(ev.Scores, int32(s))
	}
	return append(out, &waterlinev1.SessionResponse{Message: &waterlinev1.SessionResponse_Evaluation{Evaluation: ev}})
}

// sessionLog is every Session message the fake handled so far, in order.
func (f *fakeScorer) sessionLog() []sessionMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.handled)
}

// sessionCalls counts the Session messages handled, by kind.
func (f *fakeScorer) sessionCalls() (evaluates, reserves, unreserves int) {
	for _, m := range f.sessionLog() {
		switch m.kind {
		case "evaluate":
			evaluates++
		case "reserve":
			reserves++
		case "unreserve":
			unreserves++
		}
	}
	return evaluates, reserves, unreserves
}

// of returns the messages of one kind.
func of(log []sessionMsg, kind string) []sessionMsg {
	var out []sessionMsg
	for _, m := range log {
		if m.kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// waitSession waits until the fake's session log satisfies done (the plugin writes Reserves
// without waiting, so the fake may handle them a little after Reserve returned).
func (f *fakeScorer) waitSession(t *testing.T, what string, done func([]sessionMsg) bool) []sessionMsg {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		log := f.sessionLog()
		if done(log) {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake scorer: %s not seen within 10s; session log %v", what, log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fakeScorer) wait(ctx context.Context) error {
	if f.delay == 0 {
		return nil
	}
	select {
	case <-time.After(f.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeScorer) Filter(ctx context.Context, req *waterlinev1.FilterRequest) (*waterlinev1.FilterResponse, error) {
	f.mu.Lock()
	f.filters = append(f.filters, req)
	f.mu.Unlock()
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	resp := &waterlinev1.FilterResponse{Rejected: map[string]string{}}
	candidates := req.GetNodeNames()
	if req.GetAllNodes() {
		if len(candidates) != 0 {
			return nil, status.Error(codes.InvalidArgument, "node_names must be empty when all_nodes is set")
		}
		candidates = f.nodes
	}
	for _, n := range candidates {
		if reason := f.rejectReason(n); reason != "" {
			resp.Rejected[n] = reason
		} else if !req.GetAllNodes() {
			resp.FeasibleNodes = append(resp.FeasibleNodes, n)
		}
	}
	return resp, nil
}

func (f *fakeScorer) rejectReason(node string) string {
	if f.reject == nil {
		return ""
	}
	return f.reject(node)
}

func (f *fakeScorer) Score(ctx context.Context, req *waterlinev1.ScoreRequest) (*waterlinev1.ScoreResponse, error) {
	f.mu.Lock()
	f.scores = append(f.scores, req)
	f.mu.Unlock()
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	resp := &waterlinev1.ScoreResponse{}
	for _, n := range req.GetNodeNames() {
		s := int64(0)
		if f.score != nil {
			s = f.score(n)
		}
		if req.GetScoresOnly() && !f.namesOnly {
			resp.OrderedScores = append(resp.OrderedScores, int32(s))
		} else {
			resp.Scores = append(resp.Scores, &waterlinev1.NodeScore{NodeName: n, Score: int32(s)})
		}
	}
	return resp, nil
}

func (f *fakeScorer) Reserve(ctx context.Context, req *waterlinev1.ReserveRequest) (*waterlinev1.ReserveResponse, error) {
	f.mu.Lock()
	f.reserves = append(f.reserves, req)
	f.mu.Unlock()
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &waterlinev1.ReserveResponse{}, nil
}

func (f *fakeScorer) Unreserve(ctx context.Context, req *waterlinev1.UnreserveRequest) (*waterlinev1.UnreserveResponse, error) {
	f.mu.Lock()
	f.unreserve = append(f.unreserve, req)
	f.mu.Unlock()
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &waterlinev1.UnreserveResponse{}, nil
}

// calls returns how many RPCs of each kind the fake has received.
func (f *fakeScorer) calls() (filter, score, reserve, unreserve int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.filters), len(f.scores), len(f.reserves), len(f.unreserve)
}

// serve runs the fake on an in-memory bufconn listener until the test ends. Tests give the
// plugin an IP-literal endpoint, which gRPC's default resolver hands straight to the
// bufconn dialer without a DNS lookup.
func serve(t *testing.T, f *fakeScorer) *bufconn.Listener {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	waterlinev1.RegisterScorerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis
}

// factoryFor returns a plugin factory whose gRPC connection goes to lis whatever the
// endpoint in the args says.
func factoryFor(lis *bufconn.Listener) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
		return newPlugin(ctx, obj, bufconnDialer(lis))
	}
}

// capturingFactory is factoryFor that also hands the test the plugin it made.
func capturingFactory(lis *bufconn.Listener, out **Waterline) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
		pl, err := newPlugin(ctx, obj, bufconnDialer(lis))
		*out = pl
		return pl, err
	}
}

// bufconnDialer sends a connection to lis whatever address it is asked for.
func bufconnDialer(lis *bufconn.Listener) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})
}

// rawArgs encodes plugin args the way kube-scheduler hands them to a plugin without a
// registered scheme.
func rawArgs(t *testing.T, args map[string]any) *runtime.Unknown {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

// nodeNamesUpTo is node-000 … node-(n-1), the cluster of a test framework of n nodes.
func nodeNamesUpTo(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = nodeName(i)
	}
	return names
}
