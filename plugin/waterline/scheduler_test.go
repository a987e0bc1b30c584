package waterline

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/test/bufconn"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
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

// TestRealSchedulerOneBlockingCallPerPod runs kube-scheduler's own scheduling loop
// (scheduler.New with the shipped profile, a fake API client, every in-tree plugin of the
// profile) and counts what the plugin asks the fake scorer per scheduled pod: one Evaluate
// waited for, one Reserve written, no unary RPC.
func TestRealSchedulerOneBlockingCallPerPod(t *testing.T) {
	for _, nodeCount := range []int{3, 500} {
		t.Run(fmt.Sprintf("%d nodes", nodeCount), func(t *testing.T) {
			fake := &fakeScorer{
				nodes:  nodeNamesUpTo(nodeCount),
				reject: rejectNode1,
				score:  scoreOf,
			}
			lis := serve(t, fake)
			var pl *Waterline
			rec := &preScoreRecorder{}
			client, bindings := startScheduler(t, rec.factory(lis, &pl), nodeCount)

			const pods = 3
			for i := range pods {
				pod := st.MakePod().Namespace("default").Name(fmt.Sprintf("web-%d", i)).UID(fmt.Sprintf("uid-%d", i)).
					SchedulerName("waterline-scheduler").Req(map[v1.ResourceName]string{"cpu": "100m", "memory": "128Mi"}).Obj()
				if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				// One pod at a time, so each pod's calls can be checked against its own bind.
				node := bindings.wait(t, pod.Name)

				log := fake.waitSession(t, "the pod's Reserve", func(l []sessionMsg) bool { return len(of(l, "reserve")) == i+1 })
				evaluates, reserves := of(log, "evaluate"), of(log, "reserve")
				if len(evaluates) != i+1 || pl.roundTrips.Load() != int64(i+1) {
					t.Fatalf("after %d pod(s): %d Evaluates, %d calls waited on; want one per pod", i+1, len(evaluates), pl.roundTrips.Load())
				}
				if filters, scores, reserves, unreserves := fake.calls(); filters+scores+reserves+unreserves != 0 {
					t.Fatalf("unary RPCs Filter/Score/Reserve/Unreserve = %d/%d/%d/%d, want none", filters, scores, reserves, unreserves)
				}
				// The in-tree scores left in the profile are equal on these identical nodes,
				// so the pod must land on a node the Evaluate ranked best among those the
				// scheduler scored (it samples percentageOfNodesToScore of the feasible; with
				// 500 nodes several may tie, and it picks one of them at random).
				scored := rec.cycle(i)
				best := int64(-1)
				for _, n := range scored {
					if n == nodeName(1) {
						t.Fatalf("node rejected by the Evaluate was scored")
					}
					best = max(best, scoreOf(n))
				}
				if !slices.Contains(scored, node) || scoreOf(node) != best {
					t.Fatalf("pod %s bound to %s (score %d), want a node with the best score %d of the %d scored",
						pod.Name, node, scoreOf(node), best, len(scored))
				}
				if r := reserves[i]; r.node != node || r.pod.GetUid() != string(pod.UID) {
					t.Fatalf("Reserve(%s, %s), want (%s, %s)", r.node, r.pod.GetUid(), node, pod.UID)
				}
			}
			if log := fake.sessionLog(); log[0].kind != "evaluate" || log[1].kind != "reserve" || log[2].kind != "evaluate" {
				t.Fatalf("session order %v, want each pod's Reserve before the next pod's Evaluate", log)
			}
		})
	}
}

// preScoreRecorder wraps the plugin to record the nodes each cycle's PreScore got (the
// nodes the scheduler scores).
type preScoreRecorder struct {
	mu     sync.Mutex
	cycles [][]string
}

type recordingPlugin struct {
	*Waterline
	rec *preScoreRecorder
}

func (p recordingPlugin) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	p.rec.mu.Lock()
	p.rec.cycles = append(p.rec.cycles, nodeNames(nodes))
	p.rec.mu.Unlock()
	return p.Waterline.PreScore(ctx, state, pod, nodes)
}

func (r *preScoreRecorder) factory(lis *bufconn.Listener, out **Waterline) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
		pl, err := newPlugin(ctx, obj, bufconnDialer(lis))
		if err != nil {
			return nil, err
		}
		*out = pl
		return recordingPlugin{Waterline: pl, rec: r}, nil
	}
}

func (r *preScoreRecorder) cycle(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.cycles) {
		return nil
	}
	return r.cycles[i]
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
