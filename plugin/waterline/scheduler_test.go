package waterline

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const shippedConfig = "../config/scheduler-config.yaml"

// TestShippedConfigArgs checks that the plugin args in config/scheduler-config.yaml decode
// and validate (the scheduler test below swaps the endpoint for the in-process fake).
func TestShippedConfigArgs(t *testing.T) {
	cfg, err := options.LoadConfigFromFile(klog.Background(), shippedConfig)
	if err != nil {
		t.Fatalf("loading %s: %v", shippedConfig, err)
	}
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != "waterline-scheduler" {
		t.Fatalf("profiles = %+v, want one named waterline-scheduler", cfg.Profiles)
	}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name != Name {
			continue
		}
		c, err := decodeArgs(pc.Args)
		if err != nil {
			t.Fatal(err)
		}
		if c.endpoint == "" || c.timeout != DefaultTimeout || !c.failOpen {
			t.Fatalf("decoded args = %+v", c)
		}
		return
	}
	t.Fatalf("no pluginConfig for %s in %s", Name, shippedConfig)
}

// TestRealSchedulerOneRPCPerPhase runs kube-scheduler's own scheduling loop (scheduler.New
// with the shipped profile, a fake API client, every in-tree plugin of the profile) and
// counts the RPCs the fake scorer sees per scheduled pod.
func TestRealSchedulerOneRPCPerPhase(t *testing.T) {
	for _, nodeCount := range []int{3, 500} {
		t.Run(fmt.Sprintf("%d nodes", nodeCount), func(t *testing.T) {
			fake := &fakeScorer{
				nodes: nodeNamesUpTo(nodeCount),
				reject: func(n string) string {
					if n == nodeName(1) {
						return "cpu_usage_avg_5m predicted 81% > 65%"
					}
					return ""
				},
				score: scoreOf,
			}
			lis := serve(t, fake)
			client, bindings := startScheduler(t, factoryFor(lis), nodeCount)

			const pods = 3
			for i := range pods {
				pod := st.MakePod().Namespace("default").Name(fmt.Sprintf("web-%d", i)).UID(fmt.Sprintf("uid-%d", i)).
					SchedulerName("waterline-scheduler").Req(map[v1.ResourceName]string{"cpu": "100m", "memory": "128Mi"}).Obj()
				if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				// One pod at a time, so each pod's RPCs can be checked against its own bind.
				node := bindings.wait(t, pod.Name)

				filters, scores, reserves, unreserves := fake.calls()
				if filters != i+1 || scores != i+1 || reserves != i+1 || unreserves != 0 {
					t.Fatalf("after %d pod(s): Filter/Score/Reserve/Unreserve RPCs = %d/%d/%d/%d, want one Filter, Score and Reserve per pod",
						i+1, filters, scores, reserves, unreserves)
				}
				if f := fake.filters[i]; !f.GetAllNodes() || len(f.GetNodeNames()) != 0 {
					t.Fatalf("Filter RPC all_nodes=%v with %d names, want all_nodes and no names", f.GetAllNodes(), len(f.GetNodeNames()))
				}
				// The in-tree scores left in the profile are equal on these identical nodes,
				// so the pod must land on a node the Score RPC ranked best (with 500 nodes and
				// scores in 0..100 several may tie; the scheduler picks one of them at random).
				scored := fake.scores[i].GetNodeNames()
				best := int64(-1)
				for _, n := range scored {
					if n == nodeName(1) {
						t.Fatalf("node rejected by the Filter RPC was scored")
					}
					best = max(best, scoreOf(n))
				}
				if !slices.Contains(scored, node) || scoreOf(node) != best {
					t.Fatalf("pod %s bound to %s (score %d), want a node with the best score %d of the %d scored",
						pod.Name, node, scoreOf(node), best, len(scored))
				}
				if r := fake.reserves[i]; r.GetNodeName() != node || r.GetPod().GetUid() != string(pod.UID) {
					t.Fatalf("Reserve(%s, %s), want (%s, %s)", r.GetNodeName(), r.GetPod().GetUid(), node, pod.UID)
				}
			}
		})
	}
}

// bindRecorder captures the bindings the scheduler posts (the fake client does not apply
// pods/binding by itself).
type bindRecorder struct {
	mu    sync.Mutex
	nodes map[string]string
}

func (b *bindRecorder) wait(t *testing.T, pod string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		node, ok := b.nodes[pod]
		b.mu.Unlock()
		if ok {
			return node
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pod %s was not bound within 30s", pod)
	return ""
}

func startScheduler(t *testing.T, factory frameworkruntime.PluginFactory, nodeCount int) (*fake.Clientset, *bindRecorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	cfg, err := options.LoadConfigFromFile(klog.Background(), filepath.Clean(shippedConfig))
	if err != nil {
		t.Fatal(err)
	}
	prof := &cfg.Profiles[0]
	for i := range prof.PluginConfig {
		if prof.PluginConfig[i].Name == Name {
			// Any IP literal: the factory's dialer goes to the in-process fake.
			prof.PluginConfig[i].Args = rawArgs(t, map[string]any{"endpoint": "127.0.0.1:50051", "timeout": "5s"})
		}
	}

	nodes := make([]runtime.Object, nodeCount)
	for i := range nodes {
		nodes[i] = st.MakeNode().Name(nodeName(i)).Label("kubernetes.io/hostname", nodeName(i)).
			Capacity(map[v1.ResourceName]string{"cpu": "8", "memory": "32Gi", "pods": "110"}).Obj()
	}
	client := fake.NewClientset(nodes...)
	bindings := &bindRecorder{nodes: map[string]string{}}
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create, ok := action.(clienttesting.CreateAction)
		if !ok || create.GetSubresource() != "binding" {
			return false, nil, nil
		}
		binding := create.GetObject().(*v1.Binding)
		bindings.mu.Lock()
		bindings.nodes[binding.Name] = binding.Target.Name
		bindings.mu.Unlock()
		return true, binding, nil
	})

	informerFactory := scheduler.NewInformerFactory(client, 0, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	t.Cleanup(broadcaster.Shutdown)
	sched, err := scheduler.New(ctx, client, informerFactory, nil,
		profile.NewRecorderFactory(broadcaster),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(frameworkruntime.Registry{Name: factory}),
	)
	if err != nil {
		t.Fatalf("creating scheduler: %v", err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		t.Fatal(err)
	}
	go sched.Run(ctx)
	return client, bindings
}
