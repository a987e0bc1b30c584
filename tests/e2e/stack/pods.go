package stack

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// PodOpt changes a pod NewPod builds.
type PodOpt func(*v1.Pod)

// WithLabels adds labels, given as key, value, key, value...
func WithLabels(kv ...string) PodOpt {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// WithCPU sets the cpu request and, unless limit is "", the cpu limit.
func WithCPU(request, limit string) PodOpt {
	return func(p *v1.Pod) {
		r := &p.Spec.Containers[0].Resources
		r.Requests[v1.ResourceCPU] = resource.MustParse(request)
		if limit != "" {
			if r.Limits == nil {
				r.Limits = v1.ResourceList{}
			}
			r.Limits[v1.ResourceCPU] = resource.MustParse(limit)
		}
	}
}

// WithMemory sets the memory request.
func WithMemory(request string) PodOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse(request)
	}
}

// NewPod is a pod for SchedulerName with one container requesting 100m cpu and 128 Mi
// (its image is never pulled: nothing runs the pods), labelled e2e=waterline.
func NewPod(ns, name string, opts ...PodOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"e2e": "waterline"}},
		Spec: v1.PodSpec{
			SchedulerName: SchedulerName,
			Containers: []v1.Container{{
				Name:  "c",
				Image: "registry.invalid/never-pulled:1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("100m"),
					v1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// PodNames are prefix-0 … prefix-(n-1).
func PodNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// EnsureNamespace creates ns unless it exists.
func (s *Stack) EnsureNamespace(ns string) {
	if ns == "default" {
		return
	}
	_, err := s.Cluster.Client.CoreV1().Namespaces().Create(s.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		s.t.Fatal(err)
	}
}

// CreatePods creates the pods concurrently (workers parallel calls; 0: 16).
func (s *Stack) CreatePods(pods []*v1.Pod, workers int) {
	s.t.Helper()
	if workers <= 0 {
		workers = 16
	}
	errs := make(chan error, len(pods))
	work := make(chan *v1.Pod)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if _, err := s.Cluster.Client.CoreV1().Pods(p.Namespace).Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
		}()
	}
	for _, p := range pods {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		s.t.Fatal(err)
	}
}

// PacedPods creates n pods named prefix-i in ns, one every gap, in the background; the
// channel gets the outcome once all are created.
func (s *Stack) PacedPods(ns, prefix string, n int, gap time.Duration) ([]string, <-chan error) {
	names := PodNames(prefix, n)
	done := make(chan error, 1)
	go func() {
		for i, name := range names {
			if i > 0 {
				time.Sleep(gap)
			}
			if _, err := s.Cluster.Client.CoreV1().Pods(ns).Create(s.ctx, NewPod(ns, name), metav1.CreateOptions{}); err != nil {
				done <- fmt.Errorf("create %s/%s: %w", ns, name, err)
				return
			}
		}
		done <- nil
	}()
	return names, done
}

// Burst creates n pods at once (one API call each, all in flight together), labelled
// burst=prefix, and returns the placements per node once all are bound.
func (s *Stack) Burst(ns, prefix string, n int, opts ...PodOpt) map[string]int {
	s.t.Helper()
	names := PodNames(prefix, n)
	pods := make([]*v1.Pod, n)
	for i, name := range names {
		pods[i] = NewPod(ns, name, append([]PodOpt{WithLabels("burst", prefix)}, opts...)...)
	}
	t0 := time.Now()
	s.CreatePods(pods, n)
	placed := s.WaitScheduled(ns, names, 3*time.Minute)
	s.t.Logf("burst %s: %d pods created and bound in %v", prefix, n, time.Since(t0).Round(time.Millisecond))
	return s.CountPerNode(placed)
}

// WaitScheduled waits until every named pod in ns has spec.nodeName; returns name -> node.
// On a timeout it fails with the first pending pod's conditions.
func (s *Stack) WaitScheduled(ns string, names []string, timeout time.Duration) map[string]string {
	s.t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]string{}
	err := WaitFor(s.ctx, timeout, 200*time.Millisecond, fmt.Sprintf("%d pods scheduled", len(names)), func() (bool, error) {
		list, err := s.Cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if want[p.Name] && p.Spec.NodeName != "" {
				got[p.Name] = p.Spec.NodeName
			}
		}
		return len(got) == len(want), nil
	})
	if err != nil {
		var pending []string
		for n := range want {
			if _, ok := got[n]; !ok {
				pending = append(pending, n)
			}
		}
		sort.Strings(pending)
		msg := ""
		if len(pending) > 0 {
			msg = s.PodConditions(ns, pending[0])
		}
		s.t.Fatalf("%v; pending: %v; %s", err, pending, msg)
	}
	return got
}

// BoundCount counts the pods of ns with spec.nodeName set.
func (s *Stack) BoundCount(ns string) (int, error) {
	list, err := s.Cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// PodConditions describes the pod's conditions, for failure messages.
func (s *Stack) PodConditions(ns, name string) string {
	p, err := s.Cluster.Client.CoreV1().Pods(ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s) ", c.Type, c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("pod %s/%s conditions: %s", ns, name, b.String())
}

// DeletePods force-deletes the pods of ns matching selector and waits until they are
// gone and (with the pod watch) the collector's ledger holds no entry of ns.
func (s *Stack) DeletePods(ns, selector string) {
	s.t.Helper()
	gp := int64(0)
	if err := s.Cluster.Client.CoreV1().Pods(ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: &gp}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		s.t.Fatal(err)
	}
	err := WaitFor(s.ctx, 60*time.Second, 300*time.Millisecond, "pods and ledger entries gone", func() (bool, error) {
		list, err := s.Cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) > 0 {
			return false, err
		}
		if !s.KubeWatch {
			return true, nil
		}
		l, err := s.Ledger()
		if err != nil {
			return false, err
		}
		for _, e := range l {
			if e.GetNamespace() == ns {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// WaitFailedScheduling waits for a FailedScheduling event of the pod whose message
// contains want (any message when want is empty); returns it.
func (s *Stack) WaitFailedScheduling(ns, pod, want string, timeout time.Duration) string {
	s.t.Helper()
	var msg string
	err := WaitFor(s.ctx, timeout, 500*time.Millisecond, "FailedScheduling event for "+pod, func() (bool, error) {
		evs, err := s.Cluster.Client.CoreV1().Events(ns).List(s.ctx, metav1.ListOptions{
			FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("involvedObject.name", pod),
				fields.OneTermEqualSelector("reason", "FailedScheduling"),
			).String(),
		})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			msg = e.Message
			if strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		s.t.Fatalf("%v; last event message %q; %s", err, msg, s.PodConditions(ns, pod))
	}
	return msg
}

// CountPerNode counts placements per fake node (every fake node present, 0 included).
func (s *Stack) CountPerNode(placed map[string]string) map[string]int {
	c := map[string]int{}
	for _, n := range s.Nodes {
		c[n] = 0
	}
	for _, n := range placed {
		c[n]++
	}
	return c
}

// MinMax are the lowest and highest count.
func MinMax(c map[string]int) (int, int) {
	lo, hi := 1<<30, -1
	for _, v := range c {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// FmtCounts is "node-0:3 node-1:2 …" in node order.
func FmtCounts(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(keys[i], "node-"))
		b, _ := strconv.Atoi(strings.TrimPrefix(keys[j], "node-"))
		return a < b
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, c[k])
	}
	return strings.Join(parts, " ")
}
