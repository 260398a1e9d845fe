package cache

import (
	"strconv"
	"strings"

	"github.com/berth-io/berth/scheduler/framework"
)

// misfit re-checks a placement against a live NodeInfo with the rules of
// NodeResourcesFit and NodePorts, and says why it no longer fits ("" if it
// does). It allocates only when it reports a misfit.
func (c *Cache) misfit(pi *framework.PodInfo, ni *framework.NodeInfo) string {
	alloc, used, req := &ni.Allocatable, &ni.Requested, &pi.Requests

	if int64(len(ni.Pods))+1 > alloc.AllowedPodNumber {
		return "too many pods (" + strconv.Itoa(len(ni.Pods)) + " of " + strconv.FormatInt(alloc.AllowedPodNumber, 10) + ")"
	}
	// As in Kubernetes, a resource the pod does not request is never
	// checked, so an over-committed node still takes a pod asking for none.
	if framework.Exceeds(req.MilliCPU, used.MilliCPU, alloc.MilliCPU) {
		return insufficient(framework.ResourceCPU, req.MilliCPU, used.MilliCPU, alloc.MilliCPU)
	}
	if framework.Exceeds(req.Memory, used.Memory, alloc.Memory) {
		return insufficient(framework.ResourceMemory, req.Memory, used.Memory, alloc.Memory)
	}
	if framework.Exceeds(req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage) {
		return insufficient(framework.ResourceEphemeralStorage, req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage)
	}
	for name, q := range req.Scalar {
		if q == 0 || c.ignored(name) {
			continue
		}
		// A resource the node does not offer has allocatable 0.
		if framework.Exceeds(q, used.Scalar[name], alloc.Scalar[name]) {
			return insufficient(name, q, used.Scalar[name], alloc.Scalar[name])
		}
	}

	for i := range pi.Pod.Containers {
		for _, port := range pi.Pod.Containers[i].Ports {
			if port.HostPort > 0 && ni.UsedPorts.CheckConflict(port.HostIP, port.Protocol, port.HostPort) {
				return "host port " + strconv.Itoa(int(port.HostPort)) + "/" + string(port.Protocol) + " in use"
			}
		}
	}
	return ""
}

func insufficient(name string, req, used, alloc int64) string {
	return "insufficient " + name + " (requested " + strconv.FormatInt(req, 10) +
		", used " + strconv.FormatInt(used, 10) + ", allocatable " + strconv.FormatInt(alloc, 10) + ")"
}

func (c *Cache) ignored(name string) bool {
	if len(c.ignoredResources) > 0 && c.ignoredResources[name] {
		return true
	}
	if len(c.ignoredResourceGroups) > 0 {
		group, _, _ := strings.Cut(name, "/")
		return c.ignoredResourceGroups[group]
	}
	return false
}
