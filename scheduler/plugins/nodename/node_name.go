// Package nodename honours a pod that asks for one node by name.
package nodename

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.NodeName

// ErrReason is kube's message for any other node.
const ErrReason = "node(s) didn't match the requested node name"

// NodeName rejects every node but the one the pod names, if it names one.
type NodeName struct{}

var (
	_ framework.FilterPlugin      = (*NodeName)(nil)
	_ framework.EnqueueExtensions = (*NodeName)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &NodeName{}, nil
}

// Name implements framework.Plugin.
func (*NodeName) Name() string { return Name }

// Filter implements framework.FilterPlugin. Kube:
// pkg/scheduler/framework/plugins/nodename/node_name.go.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	if !Fits(pod.Pod, nodeInfo.Node()) {
		return otherNode
	}
	return nil
}

// otherNode is Filter's rejection (framework.NewRejection): a pod that
// names its node rejects every other.
var otherNode = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReason)

// Fits reports whether the pod names no node or names this one.
func Fits(pod *framework.Pod, node *framework.Node) bool {
	return pod.NodeName == "" || pod.NodeName == node.Name
}

// EventsToRegister implements framework.EnqueueExtensions: only the
// arrival of the named node can help.
func (*NodeName) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd},
		QueueingHintFn: isSchedulableAfterNodeAdd,
	}}, nil
}

func isSchedulableAfterNodeAdd(pod *framework.Pod, _, newObj any) (framework.QueueingHint, error) {
	n, ok := newObj.(*framework.Node)
	if !ok || n == nil {
		return framework.Queue, nil
	}
	if Fits(pod, n) {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

var _ framework.SignPlugin = (*NodeName)(nil)

// AppendSignature implements framework.SignPlugin: the node the pod names.
func (*NodeName) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	return framework.AppendSigString(sig, pod.Pod.NodeName), true
}
