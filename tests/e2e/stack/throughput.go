package stack

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// Throughput is a run's binding rate.
type Throughput struct {
	// Avg: bindings per second from the first to the last.
	Avg float64
	// P50: the median of the 1 s samples (scheduler_perf style: bindings per second, the
	// first and last partial seconds dropped).
	P50 float64
	// Span: from the first binding to the last.
	Span time.Duration
}

// MeasureBindings watches ns, calls start, and waits until n pods have
// spec.nodeName; throughput is measured from the first to the last binding.
//
// The watch is read by its own goroutine from before start() on: the
// apiserver closes a watcher that does not drain its events ("unresponsive"),
// which happened while the test goroutine sat in StartScheduler. A watch that
// closes anyway is re-opened from a fresh list (bindings found in that list
// are stamped with the time of the list).
func (s *Stack) MeasureBindings(ns string, n int, start func()) Throughput {
	s.t.Helper()
	type binding struct {
		name string
		at   time.Time
	}
	seen := make(chan binding, n+16)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	pods := s.Cluster.Client.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	bound := map[string]bool{}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound[p.Name] = true
		}
	}
	var reopened atomic.Int32
	go func() {
		found := map[string]bool{}
		for k := range bound {
			found[k] = true
		}
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err == nil {
				for ev := range w.ResultChan() {
					if ev.Type != watch.Modified && ev.Type != watch.Added {
						continue
					}
					if p, ok := ev.Object.(*v1.Pod); ok && p.Spec.NodeName != "" && !found[p.Name] {
						found[p.Name] = true
						seen <- binding{p.Name, time.Now()}
					}
				}
				w.Stop()
			}
			if ctx.Err() != nil {
				return
			}
			// Closed (or failed to open): catch up from a list, then watch again.
			reopened.Add(1)
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				if ctx.Err() == nil {
					errc <- err
				}
				return
			}
			now := time.Now()
			for _, p := range l.Items {
				if p.Spec.NodeName != "" && !found[p.Name] {
					found[p.Name] = true
					seen <- binding{p.Name, now}
				}
			}
			rv = l.ResourceVersion
		}
	}()
	start()
	var times []time.Time
	for len(bound) < n {
		select {
		case b := <-seen:
			bound[b.name] = true
			times = append(times, b.at)
		case err := <-errc:
			s.t.Fatalf("pod list after a closed watch: %v (%d of %d bound)", err, len(bound), n)
		case <-ctx.Done(): // the test's deadline follows go test -timeout
			s.t.Fatalf("only %d of %d pods bound before the test deadline (%v)", len(bound), n, ctx.Err())
		}
	}
	cancel()
	if r := reopened.Load(); r > 0 {
		s.t.Logf("MeasureBindings: the pod watch was re-opened %d time(s)", r)
	}
	if len(times) < 2 {
		return Throughput{}
	}
	span := times[len(times)-1].Sub(times[0])
	res := Throughput{Span: span, Avg: float64(len(times)-1) / span.Seconds()}
	// 1 s samples (scheduler_perf style): bindings per second, first and last partial seconds dropped.
	var samples []float64
	t0 := times[0]
	buckets := map[int]int{}
	last := 0
	for _, tm := range times {
		k := int(tm.Sub(t0) / time.Second)
		buckets[k]++
		last = k
	}
	for k := 1; k < last; k++ {
		samples = append(samples, float64(buckets[k]))
	}
	if len(samples) > 0 {
		sort.Float64s(samples)
		res.P50 = samples[len(samples)/2]
	} else {
		res.P50 = res.Avg
	}
	return res
}

// ProbeScorer calls ScorerService/Score n times with k node names from a Go
// client and returns the mean round trip.
func (s *Stack) ProbeScorer(ctx context.Context, k, n int) string {
	conn, err := grpc.NewClient(s.Scorer.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "probe: " + err.Error()
	}
	defer conn.Close()
	c := wlv1.NewScorerServiceClient(conn)
	names := make([]string, min(k, len(s.Nodes)))
	copy(names, s.Nodes)
	req := &wlv1.ScoreRequest{Pod: &wlv1.PodInfo{Namespace: "default", Name: "probe", Uid: "probe-uid", CpuRequestMillis: 10, SchedulerName: SchedulerName}, NodeNames: names}
	var total time.Duration
	for i := 0; i < n+1; i++ {
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Score(cctx, req)
		cancel()
		if err != nil {
			return "probe: Score: " + err.Error()
		}
		if i > 0 { // the first call connects
			total += time.Since(t0)
		}
	}
	return fmt.Sprintf("grpc-go -> scorer Score with %d nodes: mean %.2f ms over %d calls", len(names), float64(total.Microseconds())/1000/float64(n), n)
}
