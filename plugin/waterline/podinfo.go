package waterline

import (
	v1 "k8s.io/api/core/v1"
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
// Limits are aggregated the same way, with one difference: a pod whose app containers or
// sidecars do not all carry a limit for a resource has no limit for it as a whole (the
// kubelet sizes the pod cgroup the same way), so it is sent as 0 = "not set". Summing only
// the limits that exist would cap the scorer's usage estimate far too low.
func toPodInfo(pod *v1.Pod) *waterlinev1.PodInfo {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuBounded, memBounded := limitsBounded(pod)

	info := &waterlinev1.PodInfo{
		Namespace:          pod.Namespace,
		Name:               pod.Name,
		Uid:                string(pod.UID),
		Labels:             pod.Labels,
		CpuRequestMillis:   requests.Cpu().MilliValue(),
		MemoryRequestBytes: requests.Memory().Value(),
		PriorityClass:      pod.Spec.PriorityClassName,
		SchedulerName:      pod.Spec.SchedulerName,
	}
	if cpuBounded {
		info.CpuLimitMillis = limits.Cpu().MilliValue()
	}
	if memBounded {
		info.MemoryLimitBytes = limits.Memory().Value()
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		info.OwnerKind = owner.Kind
	}
	return info
}

// limitsBounded reports, per resource, whether the pod as a whole is limited: either by a
// pod-level limit or because every container that keeps running (app containers and
// sidecars) has a limit. Regular init containers finish before the app containers start,
// so a missing limit there does not leave the running pod unbounded.
func limitsBounded(pod *v1.Pod) (cpu, memory bool) {
	if pl := pod.Spec.Resources; pl != nil {
		_, cpu = pl.Limits[v1.ResourceCPU]
		_, memory = pl.Limits[v1.ResourceMemory]
		if cpu && memory {
			return true, true
		}
	}
	cpuAll, memAll := true, true
	check := func(c *v1.Container) {
		if q, ok := c.Resources.Limits[v1.ResourceCPU]; !ok || q.IsZero() {
			cpuAll = false
		}
		if q, ok := c.Resources.Limits[v1.ResourceMemory]; !ok || q.IsZero() {
			memAll = false
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			check(c)
		}
	}
	return cpu || cpuAll, memory || memAll
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// isDaemonSetPod reports whether the pod's controller is a DaemonSet. Such pods must land
// on their node whatever its load (they are the node's own agents), so the plugin never
// filters them.
func isDaemonSetPod(pod *v1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}
