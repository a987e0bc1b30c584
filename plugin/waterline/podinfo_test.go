package waterline

import (
	"encoding/json"
	"maps"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// container builds a container with cpu/memory requests and, when given, limits
// ("" leaves a value unset).
func container(name, cpuReq, memReq, cpuLim, memLim string) v1.Container {
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}}
	set := func(l v1.ResourceList, r v1.ResourceName, q string) {
		if q != "" {
			l[r] = resource.MustParse(q)
		}
	}
	set(c.Resources.Requests, v1.ResourceCPU, cpuReq)
	set(c.Resources.Requests, v1.ResourceMemory, memReq)
	set(c.Resources.Limits, v1.ResourceCPU, cpuLim)
	set(c.Resources.Limits, v1.ResourceMemory, memLim)
	return c
}

func sidecar(c v1.Container) v1.Container {
	c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return c
}

const mi = int64(1) << 20

func TestToPodInfoResources(t *testing.T) {
	for _, tc := range []struct {
		name           string
		spec           v1.PodSpec
		cpuReq, cpuLim int64
		memReq, memLim int64
	}{
		{
			name: "app containers are summed",
			spec: v1.PodSpec{Containers: []v1.Container{
				container("a", "100m", "100Mi", "200m", "200Mi"),
				container("b", "300m", "50Mi", "300m", "100Mi"),
			}},
			cpuReq: 400, memReq: 150 * mi, cpuLim: 500, memLim: 300 * mi,
		},
		{
			name: "a larger init container sets the floor",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{container("migrate", "2", "1Gi", "2", "1Gi")},
				Containers:     []v1.Container{container("a", "100m", "100Mi", "200m", "200Mi")},
			},
			// Limits: the init container has finished before the app runs, so only the
			// app's count (PodLimits would say 2 / 1Gi; waterline's rule, core/src/pod).
			cpuReq: 2000, memReq: 1024 * mi, cpuLim: 200, memLim: 200 * mi,
		},
		{
			name: "a smaller init container changes nothing",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{container("wait", "10m", "10Mi", "10m", "10Mi")},
				Containers:     []v1.Container{container("a", "100m", "100Mi", "200m", "200Mi")},
			},
			cpuReq: 100, memReq: 100 * mi, cpuLim: 200, memLim: 200 * mi,
		},
		{
			// Sidecars run for the pod's lifetime, so they add to the app containers, and a
			// later init container runs next to the sidecars started before it.
			name: "sidecars are summed with app containers and stack under later init containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					sidecar(container("proxy", "200m", "64Mi", "200m", "64Mi")),
					container("migrate", "1", "128Mi", "1", "128Mi"),
				},
				Containers: []v1.Container{container("a", "100m", "100Mi", "200m", "200Mi")},
			},
			// requests: max(200m+100m, 200m+1) = 1200m; memory: max(64+100, 64+128) = 192Mi
			// limits: app + sidecar only, 200m+200m = 400m (PodLimits' max with the
			// finished init container gave 1200m); 200Mi+64Mi = 264Mi.
			cpuReq: 1200, memReq: 192 * mi, cpuLim: 400, memLim: 264 * mi,
		},
		{
			name: "overhead is added",
			spec: v1.PodSpec{
				Containers: []v1.Container{container("a", "100m", "100Mi", "200m", "200Mi")},
				Overhead:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("120Mi")},
			},
			cpuReq: 350, memReq: 220 * mi, cpuLim: 450, memLim: 320 * mi,
		},
		{
			// One container without a limit leaves the pod unlimited: 0 = "not set".
			name: "a running container without a limit leaves the pod unlimited",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar(container("proxy", "100m", "64Mi", "", "64Mi"))},
				Containers:     []v1.Container{container("a", "100m", "100Mi", "200m", "")},
			},
			cpuReq: 200, memReq: 164 * mi, cpuLim: 0, memLim: 0,
		},
		{
			// A regular init container has finished before the app starts; its missing
			// limit does not unbound the running pod.
			name: "an init container without a limit keeps the pod limited",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{container("wait", "10m", "10Mi", "", "")},
				Containers:     []v1.Container{container("a", "100m", "100Mi", "200m", "200Mi")},
			},
			cpuReq: 100, memReq: 100 * mi, cpuLim: 200, memLim: 200 * mi,
		},
		{
			name:   "best effort",
			spec:   v1.PodSpec{Containers: []v1.Container{container("a", "", "", "", "")}},
			cpuReq: 0, memReq: 0, cpuLim: 0, memLim: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := toPodInfo(&v1.Pod{Spec: tc.spec})
			if info.GetCpuRequestMillis() != tc.cpuReq || info.GetMemoryRequestBytes() != tc.memReq {
				t.Errorf("requests = %dm/%d, want %dm/%d", info.GetCpuRequestMillis(), info.GetMemoryRequestBytes(), tc.cpuReq, tc.memReq)
			}
			if info.GetCpuLimitMillis() != tc.cpuLim || info.GetMemoryLimitBytes() != tc.memLim {
				t.Errorf("limits = %dm/%d, want %dm/%d", info.GetCpuLimitMillis(), info.GetMemoryLimitBytes(), tc.cpuLim, tc.memLim)
			}
		})
	}
}

func TestToPodInfoIdentity(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "web-7d9f-x2", UID: "8f0c",
			Labels: map[string]string{"app": "web", "tier": "front"},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", Controller: ptr.To(true)},
			},
		},
		Spec: v1.PodSpec{SchedulerName: "waterline-scheduler", PriorityClassName: "high"},
	}
	info := toPodInfo(pod)
	if info.GetNamespace() != "shop" || info.GetName() != "web-7d9f-x2" || info.GetUid() != "8f0c" {
		t.Errorf("identity = %s/%s %s", info.GetNamespace(), info.GetName(), info.GetUid())
	}
	if info.GetOwnerKind() != "ReplicaSet" {
		t.Errorf("owner kind = %q, want the controller's kind ReplicaSet", info.GetOwnerKind())
	}
	if info.GetSchedulerName() != "waterline-scheduler" || info.GetPriorityClass() != "high" {
		t.Errorf("scheduler/priority = %q/%q", info.GetSchedulerName(), info.GetPriorityClass())
	}
	if len(info.GetLabels()) != 2 || info.GetLabels()["tier"] != "front" {
		t.Errorf("labels = %v", info.GetLabels())
	}
	if bypassesLoadFilters(pod) {
		t.Error("a ReplicaSet pod was taken for a DaemonSet pod")
	}
	pod.Annotations = map[string]string{"waterline.io/load-filter": "off"}
	if !bypassesLoadFilters(pod) {
		t.Error(`a pod annotated waterline.io/load-filter: "off" was filtered`)
	}
}

// fixtureCase is one case of tests/fixtures/pod-resources.json, the table the Rust
// collector and extender run too.
type fixtureCase struct {
	Name      string          `json:"name"`
	Pod       json.RawMessage `json:"pod"`
	Requests  amounts         `json:"requests"`
	Limits    amounts         `json:"limits"`
	OwnerKind *string         `json:"ownerKind"`
	OwnerName *string         `json:"ownerName"`
	Priority  *int32          `json:"priority"`
	// Annotations are the waterline.io/ annotations a reader keeps.
	Annotations map[string]string `json:"annotations"`
}

type amounts struct {
	CPUMillis   int64 `json:"cpuMillis"`
	MemoryBytes int64 `json:"memoryBytes"`
}

// TestPodInfoFixtureTable runs the shared pod fixture table through toPodInfo. Only
// requests and limits are compared: the table's estimate is computed by the scorer from
// these numbers (waterline_core::estimate), never by the plugin.
func TestPodInfoFixtureTable(t *testing.T) {
	runFixtureTable(t, "../../tests/fixtures/pod-resources.json", 15)
}

// TestPodInfoGeneratedCorpus runs the pods tests/tests/fuzz_pods.rs generated (random
// containers, sidecars, pod-level resources, overhead and quantities, with core's requests
// and limits) through toPodInfo, so Go's resource.Quantity and the Rust parser agree too.
func TestPodInfoGeneratedCorpus(t *testing.T) {
	runFixtureTable(t, "../../tests/fixtures/pod-resources-generated.json", 100)
}

func runFixtureTable(t *testing.T, path string, atLeast int) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []fixtureCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < atLeast {
		t.Fatalf("%d cases in %s", len(cases), path)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var pod v1.Pod
			if err := json.Unmarshal(tc.Pod, &pod); err != nil {
				t.Fatalf("not a v1.Pod: %v", err)
			}
			info := toPodInfo(&pod)
			if got := (amounts{info.GetCpuRequestMillis(), info.GetMemoryRequestBytes()}); got != tc.Requests {
				t.Errorf("requests = %+v, want %+v", got, tc.Requests)
			}
			if got := (amounts{info.GetCpuLimitMillis(), info.GetMemoryLimitBytes()}); got != tc.Limits {
				t.Errorf("limits = %+v, want %+v", got, tc.Limits)
			}
			if tc.OwnerKind != nil && info.GetOwnerKind() != *tc.OwnerKind {
				t.Errorf("owner kind = %q, want %q", info.GetOwnerKind(), *tc.OwnerKind)
			}
			if tc.OwnerName != nil && info.GetOwnerName() != *tc.OwnerName {
				t.Errorf("owner name = %q, want %q", info.GetOwnerName(), *tc.OwnerName)
			}
			if tc.Priority != nil && info.GetPriority() != *tc.Priority {
				t.Errorf("priority = %d, want %d", info.GetPriority(), *tc.Priority)
			}
			if tc.Annotations != nil && !maps.Equal(info.GetAnnotations(), tc.Annotations) {
				t.Errorf("annotations = %v, want %v", info.GetAnnotations(), tc.Annotations)
			}
		})
	}
}
