// Package nodeports keeps pods off nodes where a host port they ask for is
// already taken.
package nodeports

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.NodePorts

// ErrReason is the rejection reason, Kubernetes' wording.
const ErrReason = "node(s) didn't have free ports for the requested pod ports"

const preFilterStateKey framework.StateKey = "PreFilter" + Name

// NodePorts rejects nodes where one of the pod's host ports is in use.
// Kube: pkg/scheduler/framework/plugins/nodeports/node_ports.go.
type NodePorts struct{}

var (
	_ framework.PreFilterPlugin   = (*NodePorts)(nil)
	_ framework.FilterPlugin      = (*NodePorts)(nil)
	_ framework.EnqueueExtensions = (*NodePorts)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &NodePorts{}, nil
}

// Name implements framework.Plugin.
func (*NodePorts) Name() string { return Name }

// preFilterState is the pod's host ports; pods are immutable, so it is
// shared, never copied.
type preFilterState []framework.ContainerPort

func (s preFilterState) Clone() framework.StateData { return s }

// hostPorts returns the ports of the pod's containers that claim a host
// port. Init containers run to completion before the others start, so
// they hold no port while the pod runs (Berth has no sidecar init
// containers, the only ones Kubernetes counts).
func hostPorts(pod *framework.Pod) []framework.ContainerPort {
	var out []framework.ContainerPort
	for i := range pod.Containers {
		for _, p := range pod.Containers[i].Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// PreFilter implements framework.PreFilterPlugin: a pod without host ports
// skips the plugin.
func (*NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	ports := hostPorts(pod.Pod)
	if len(ports) == 0 {
		return nil, framework.SkipStatus()
	}
	state.Write(preFilterStateKey, preFilterState(ports))
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin: Filter reads
// the ports from the NodeInfo, which already reflects added and removed
// pods.
func (*NodePorts) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin. Unschedulable, not
// Unresolvable: evicting the pod holding the port frees it.
func (*NodePorts) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	ports, err := framework.ReadState[preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if !fitsPorts(ports, nodeInfo.UsedPorts) {
		return portsTaken
	}
	return nil
}

// portsTaken is Filter's rejection (framework.NewRejection).
var portsTaken = framework.NewRejection(framework.Unschedulable, Name, ErrReason)

// Fits reports whether none of the pod's host ports conflicts with the
// ports in use on the node.
func Fits(pod *framework.Pod, nodeInfo *framework.NodeInfo) bool {
	return fitsPorts(hostPorts(pod), nodeInfo.UsedPorts)
}

func fitsPorts(want []framework.ContainerPort, inUse framework.HostPortInfo) bool {
	for _, p := range want {
		if inUse.CheckConflict(p.HostIP, p.Protocol, p.HostPort) {
			return false
		}
	}
	return true
}

// EventsToRegister implements framework.EnqueueExtensions: a port is freed
// when a pod holding it is deleted; a new node has every port free. Pod
// updates cannot change ports.
func (*NodePorts) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete}, QueueingHintFn: isSchedulableAfterPodDeleted},
		{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd}},
	}, nil
}

// isSchedulableAfterPodDeleted queues the pod only when the deleted pod
// held (or was nominated with) a host port that conflicts with one the pod
// wants.
func isSchedulableAfterPodDeleted(pod *framework.Pod, oldObj, _ any) (framework.QueueingHint, error) {
	deleted, ok := oldObj.(*framework.Pod)
	if !ok || deleted == nil {
		return framework.Queue, nil
	}
	if deleted.NodeName == "" && deleted.NominatedNodeName() == "" {
		return framework.QueueSkip, nil
	}
	freed := hostPorts(deleted)
	if len(freed) == 0 {
		return framework.QueueSkip, nil
	}
	inUse := make(framework.HostPortInfo, len(freed))
	for _, p := range freed {
		inUse.Add(p.HostIP, p.Protocol, p.HostPort)
	}
	if fitsPorts(hostPorts(pod), inUse) {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

var _ framework.SignPlugin = (*NodePorts)(nil)

// AppendSignature implements framework.SignPlugin: the host ports the pod
// claims, in container order. The ports in use are the node's own state.
func (*NodePorts) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	ports := hostPorts(pod.Pod)
	sig = framework.AppendSigInt(sig, int64(len(ports)))
	for _, p := range ports {
		sig = framework.AppendSigString(sig, p.HostIP)
		sig = framework.AppendSigString(sig, string(p.Protocol))
		sig = framework.AppendSigInt(sig, int64(p.HostPort))
	}
	return sig, true
}
