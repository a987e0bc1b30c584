package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/waterline/waterline/tests/e2e/harness"
)

// TestSmokeSchedulesPod starts etcd + kube-apiserver + kube-scheduler (default
// profile) in-process, creates 3 fake nodes and one pod, and checks the pod is
// bound (spec.nodeName) with PodScheduled=True.
func TestSmokeSchedulesPod(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	c, err := harness.Start(ctx, t, harness.Options{
		KubeconfigPath: kubeconfig,
		StartScheduler: true, // default configuration: profile default-scheduler
	})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	defer c.Stop()

	// Use the written kubeconfig, as an out-of-process client would.
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(kubeconfig); err != nil || len(raw) == 0 {
		t.Fatalf("kubeconfig not written: %v", err)
	}

	names, err := harness.CreateFakeNodes(ctx, cs, harness.NodeSpec{
		Count: 3, CPU: "8", Memory: "32Gi", IPPrefix: "127.0.1.",
	})
	if err != nil {
		t.Fatalf("create nodes: %v", err)
	}
	for _, n := range names {
		node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Status.Allocatable.Cpu().String(); got != "8" {
			t.Fatalf("node %s allocatable cpu = %s, want 8 (status subresource not written?)", n, got)
		}
		if len(node.Spec.Taints) != 0 {
			t.Fatalf("node %s has taints %v", n, node.Spec.Taints)
		}
	}

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: v1.PodSpec{
			SchedulerName: v1.DefaultSchedulerName,
			Containers: []v1.Container{{
				Name:  "c",
				Image: "registry.invalid/never-pulled:1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("500m"),
					v1.ResourceMemory: resource.MustParse("1Gi"),
				}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}

	var got *v1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		if p.Spec.NodeName == "" {
			return false, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		if got == nil {
			t.Fatalf("pod not scheduled: %v", err)
		}
		t.Fatalf("pod not scheduled: %v; last seen: nodeName=%q conditions=%+v", err, got.Spec.NodeName, got.Status.Conditions)
	}
	found := false
	for _, n := range names {
		found = found || n == got.Spec.NodeName
	}
	if !found {
		t.Fatalf("pod bound to %q, not one of %v", got.Spec.NodeName, names)
	}
	t.Logf("pod scheduled to %s", got.Spec.NodeName)
}

func TestNodeIP(t *testing.T) {
	cases := []struct {
		prefix string
		idx    int
		want   string
		err    bool
	}{
		{"127.0.1.", 0, "127.0.1.1", false},
		{"127.0.1.", 253, "127.0.1.254", false},
		{"127.0.1.", 254, "", true},
		{"127.1.", 255, "127.1.1.0", false},
		{"127.1", 0, "127.1.0.1", false},
	}
	for _, tc := range cases {
		got, err := harness.NodeIP(tc.prefix, tc.idx)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("NodeIP(%q,%d) = %q,%v; want %q, err=%v", tc.prefix, tc.idx, got, err, tc.want, tc.err)
		}
	}
}

func TestPatchSchedulerConfig(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "cfg.yaml")
	if err := os.WriteFile(src, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/waterline/scheduler.kubeconfig
leaderElection:
  leaderElect: true
profiles:
  - schedulerName: waterline-scheduler
extenders:
  - urlPrefix: "http://127.0.0.1:8787/waterline/v1"
    prioritizeVerb: prioritize
    weight: 5
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := harness.PatchSchedulerConfig(src, "/tmp/k")
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"kubeconfig: /tmp/k", "leaderElect: false", "schedulerName: waterline-scheduler", "urlPrefix: http://127.0.0.1:8787/waterline/v1"} {
		if !strings.Contains(s, want) {
			t.Errorf("patched config lacks %q:\n%s", want, s)
		}
	}
}
