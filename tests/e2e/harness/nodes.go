package harness

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeSpec describes a batch of fake nodes. Nothing runs on them: they only
// exist for the scheduler (capacity, allocatable, Ready=True, an InternalIP).
type NodeSpec struct {
	NamePrefix string // default "node-"
	Start      int    // first index (default 0)
	Count      int
	CPU        string // e.g. "8"
	Memory     string // e.g. "32Gi"
	Pods       string // default "110"
	// IPPrefix: leading octets, e.g. "127.0.1." (node i gets 127.0.1.<Start+i+1>)
	// or "127.1." (two octets left). Empty: no InternalIP address.
	IPPrefix string
	Labels   map[string]string
	// Parallelism of API calls (default 16).
	Parallelism int
}

// NodeIP returns the InternalIP for node index idx (0-based, Start included).
func NodeIP(prefix string, idx int) (string, error) {
	p := strings.TrimSuffix(prefix, ".")
	parts := strings.Split(p, ".")
	if len(parts) < 1 || len(parts) > 3 {
		return "", fmt.Errorf("ip prefix %q: want 1 to 3 leading octets", prefix)
	}
	free := 4 - len(parts)
	n := idx + 1 // never .0
	limit := 1
	for i := 0; i < free; i++ {
		limit *= 256
	}
	if n >= limit-1 {
		return "", fmt.Errorf("ip prefix %q has no room for node index %d", prefix, idx)
	}
	octets := make([]string, free)
	for i := free - 1; i >= 0; i-- {
		octets[i] = strconv.Itoa(n % 256)
		n /= 256
	}
	ip := p + "." + strings.Join(octets, ".")
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("bad ip %q from prefix %q", ip, prefix)
	}
	return ip, nil
}

func (s *NodeSpec) defaults() error {
	if s.NamePrefix == "" {
		s.NamePrefix = "node-"
	}
	if s.CPU == "" {
		s.CPU = "8"
	}
	if s.Memory == "" {
		s.Memory = "32Gi"
	}
	if s.Pods == "" {
		s.Pods = "110"
	}
	if s.Parallelism <= 0 {
		s.Parallelism = 16
	}
	for _, q := range []string{s.CPU, s.Memory, s.Pods} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("quantity %q: %w", q, err)
		}
	}
	return nil
}

// FakeNode builds node number idx (spec and status).
func (s NodeSpec) FakeNode(idx int) (*v1.Node, error) {
	name := s.NamePrefix + strconv.Itoa(idx)
	labels := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"waterline.io/fake-node": "true",
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	res := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(s.CPU),
		v1.ResourceMemory: resource.MustParse(s.Memory),
		v1.ResourcePods:   resource.MustParse(s.Pods),
	}
	addrs := []v1.NodeAddress{{Type: v1.NodeHostName, Address: name}}
	if s.IPPrefix != "" {
		ip, err := NodeIP(s.IPPrefix, idx)
		if err != nil {
			return nil, err
		}
		addrs = append([]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}, addrs...)
	}
	now := metav1.Now()
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{},
		Status: v1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Phase:       v1.NodeRunning,
			Conditions: []v1.NodeCondition{{
				Type:               v1.NodeReady,
				Status:             v1.ConditionTrue,
				Reason:             "KubeletReady",
				Message:            "fake node (waterline e2e harness)",
				LastHeartbeatTime:  now,
				LastTransitionTime: now,
			}},
			Addresses: addrs,
			NodeInfo: v1.NodeSystemInfo{
				OperatingSystem: "linux",
				Architecture:    "amd64",
				KubeletVersion:  "v1.37.2-fake",
			},
		},
	}, nil
}

// CreateFakeNodes creates (or updates) the nodes; status is written through
// the status subresource, as a kubelet would. Returns the node names.
func CreateFakeNodes(ctx context.Context, cs kubernetes.Interface, spec NodeSpec) ([]string, error) {
	if err := spec.defaults(); err != nil {
		return nil, err
	}
	names := make([]string, spec.Count)
	errs := make([]error, spec.Count)
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < spec.Parallelism; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				names[i], errs[i] = createOne(ctx, cs, spec, spec.Start+i)
			}
		}()
	}
	for i := 0; i < spec.Count; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return names, err
		}
	}
	return names, nil
}

func createOne(ctx context.Context, cs kubernetes.Interface, spec NodeSpec, idx int) (string, error) {
	want, err := spec.FakeNode(idx)
	if err != nil {
		return "", err
	}
	nodes := cs.CoreV1().Nodes()
	// Create ignores .status; it is set below via nodes/status.
	got, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = nodes.Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return want.Name, fmt.Errorf("node %s: %w", want.Name, err)
	}
	got = got.DeepCopy()
	got.Status = want.Status
	if _, err := nodes.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return want.Name, fmt.Errorf("node %s status: %w", want.Name, err)
	}
	return want.Name, nil
}
