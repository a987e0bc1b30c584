package waterline

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	waterlinev1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
)

// toPodInfo reduces a pod to what the scorer needs.
//
// Requests are the pod's effective requests exactly as kube-scheduler's NodeResourcesFit
// computes them (the same helper): the sum over app containers and restartable init
// containers (sidecars), the max of that with each regular init container (plus the
// sidecars started before it), pod-level resources when set, plus the pod overhead.
// Limits follow waterline's rule (podLimits), the one core/src/pod/resources.rs writes
// down for the Rust services; tests/fixtures/pod-resources.json holds both to it.
func toPodInfo(pod *v1.Pod) *waterlinev1.PodInfo {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpuLimit, memLimit := podLimits(pod)

	info := &waterlinev1.PodInfo{
		Namespace:          pod.Namespace,
		Name:               pod.Name,
		Uid:                string(pod.UID),
		Labels:             pod.Labels,
		CpuRequestMillis:   requests.Cpu().MilliValue(),
		CpuLimitMillis:     cpuLimit,
		MemoryRequestBytes: requests.Memory().Value(),
		MemoryLimitBytes:   memLimit,
		PriorityClass:      pod.Spec.PriorityClassName,
		SchedulerName:      pod.Spec.SchedulerName,
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		info.OwnerKind = owner.Kind
		info.OwnerName = owner.Name
	}
	if pod.Spec.Priority != nil {
		info.Priority = *pod.Spec.Priority
	}
	for key, value := range pod.Annotations {
		// Only the per-workload overrides cross the wire (PodInfo.annotations).
		if strings.HasPrefix(key, annotationPrefix) {
			if info.Annotations == nil {
				info.Annotations = map[string]string{}
			}
			info.Annotations[key] = value
		}
	}
	return info
}

// annotationPrefix marks the annotations PodInfo carries (core/src/pod/overrides.rs).
const annotationPrefix = "waterline.io/"

// loadFilterAnnotation "off" opts a pod out of load filtering, as a DaemonSet pod is.
const loadFilterAnnotation = "waterline.io/load-filter"

// podLimits is the pod's cpu (milli-cores) and memory (bytes) limit, 0 = unbounded. Only
// the containers that keep running count (app containers and sidecars), summed; a resource
// any of them leaves without a limit, or with a zero one, is unbounded for the whole pod,
// because one unbounded container can use the node (the kubelet sizes the pod cgroup the
// same way) and a partial sum would cap the scorer's usage estimate too low. Regular init
// containers have finished before the app starts, so their limits do not count
// (resourcehelper.PodLimits takes the max with them; this rule does not). A pod-level limit
// wins where set; the overhead is added to a bounded limit.
func podLimits(pod *v1.Pod) (cpuMillis, memoryBytes int64) {
	return podLimit(pod, v1.ResourceCPU, (*resource.Quantity).MilliValue),
		podLimit(pod, v1.ResourceMemory, (*resource.Quantity).Value)
}

func podLimit(pod *v1.Pod, name v1.ResourceName, value func(*resource.Quantity) int64) int64 {
	limit, bounded := int64(0), true
	add := func(c *v1.Container) {
		q, ok := c.Resources.Limits[name]
		if !ok || q.IsZero() {
			bounded = false
			return
		}
		limit += value(&q)
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			add(c)
		}
	}
	if pl := pod.Spec.Resources; pl != nil {
		if q, ok := pl.Limits[name]; ok && !q.IsZero() {
			limit, bounded = value(&q), true
		}
	}
	if !bounded || limit <= 0 {
		return 0
	}
	if q, ok := pod.Spec.Overhead[name]; ok {
		limit += value(&q)
	}
	return limit
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// bypassesLoadFilters reports whether the pod passes every load filter, as the scorer's
// Pod::bypasses_load_filters decides: a DaemonSet pod (it must land on its node whatever
// the load: it is the node's own agent), or one annotated waterline.io/load-filter: "off".
// The plugin then never filters it.
func bypassesLoadFilters(pod *v1.Pod) bool {
	if strings.TrimSpace(pod.Annotations[loadFilterAnnotation]) == "off" {
		return true
	}
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}
