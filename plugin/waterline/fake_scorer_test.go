package waterline

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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
	// delay is applied to every RPC before answering (to provoke client timeouts).
	delay time.Duration

	mu        sync.Mutex
	filters   []*waterlinev1.FilterRequest
	scores    []*waterlinev1.ScoreRequest
	reserves  []*waterlinev1.ReserveRequest
	unreserve []*waterlinev1.UnreserveRequest
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
			resp.Scores = append(resp.Scores, &waterlinev1.NodeScore{NodeName: n, Score: s})
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
