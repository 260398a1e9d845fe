package helper

import "github.com/berth-io/berth/scheduler/framework"

// ResourceSpec is a resource a score looks at, with its weight.
type ResourceSpec struct {
	Name   string
	Weight int64
}

// DefaultResources is kube's default for resource scoring: cpu and memory,
// weight 1 each.
func DefaultResources() []ResourceSpec {
	return []ResourceSpec{{Name: framework.ResourceCPU, Weight: 1}, {Name: framework.ResourceMemory, Weight: 1}}
}

// PodRequests returns the pod's request of each resource, appended to out.
// Without useRequested, containers naming no cpu or memory count kube's
// defaults (100m, 200Mi), as NodeResourcesFit scoring does; with it, the
// plain requests, as BalancedAllocation does.
func PodRequests(pod *framework.PodInfo, resources []ResourceSpec, useRequested bool, out []int64) []int64 {
	reqs := &pod.NonZeroRequests
	if useRequested {
		reqs = &pod.Requests
	}
	for _, r := range resources {
		if r.Name == framework.ResourcePods {
			out = append(out, 0)
			continue
		}
		out = append(out, reqs.Get(r.Name))
	}
	return out
}

// AllocatableRequested returns a node's allocatable amount of a resource
// and what would be requested with the pod placed on it, as kube's
// resourceAllocationScorer.calculateResourceAllocatableRequest: cpu and
// memory count the node's non-zero requests unless useRequested;
// ephemeral storage and extended resources count plain requests; an
// extended resource the pod does not request, or the node does not have,
// and "pods", give (0, 0), which the scorers skip. The sum saturates.
func AllocatableRequested(ni *framework.NodeInfo, resource string, podRequest int64, useRequested bool) (allocatable, requested int64) {
	onNode := &ni.NonZeroRequested
	if useRequested {
		onNode = &ni.Requested
	}
	switch resource {
	case framework.ResourceCPU:
		return ni.Allocatable.MilliCPU, framework.AddQuantity(onNode.MilliCPU, podRequest)
	case framework.ResourceMemory:
		return ni.Allocatable.Memory, framework.AddQuantity(onNode.Memory, podRequest)
	case framework.ResourceEphemeralStorage:
		return ni.Allocatable.EphemeralStorage, framework.AddQuantity(ni.Requested.EphemeralStorage, podRequest)
	case framework.ResourcePods:
		return 0, 0
	}
	if podRequest == 0 {
		return 0, 0
	}
	alloc, ok := ni.Allocatable.Scalar[resource]
	if !ok {
		return 0, 0
	}
	return alloc, framework.AddQuantity(ni.Requested.Scalar[resource], podRequest)
}
