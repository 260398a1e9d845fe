// Package rejectednodes keeps a pod off the nodes that could not start it,
// until such a node's record changes. Berth's own plugin: in Kubernetes the
// kubelet admits pods, and a rejected pod is failed rather than requeued.
package rejectednodes

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.RejectedNodes

// ErrReasonRejected is the reason given for a node that rejected the pod.
const ErrReasonRejected = "node(s) rejected the pod"

// RejectedNodes rejects a node that the orchestrator reported could not
// start the pod (RejectBinding) while the node's record is unchanged since.
type RejectedNodes struct{}

var (
	_ framework.FilterPlugin      = (*RejectedNodes)(nil)
	_ framework.EnqueueExtensions = (*RejectedNodes)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &RejectedNodes{}, nil
}

// Name implements framework.Plugin.
func (*RejectedNodes) Name() string { return Name }

// Filter implements framework.FilterPlugin. Unresolvable: evicting pods
// from the node would not make it start this one.
func (*RejectedNodes) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	// Most pods were never rejected: no need to read the Node.
	if len(pod.Pod.Rejections()) > 0 && rejects(pod.Pod, nodeInfo.Node()) {
		return rejectedByOrchestrator
	}
	return nil
}

// rejectedByOrchestrator is Filter's rejection (framework.NewRejection).
var rejectedByOrchestrator = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReasonRejected)

func rejects(pod *framework.Pod, node *framework.Node) bool {
	rev, ok := pod.Rejections()[node.Name]
	return ok && rev == node.Revision
}

// EventsToRegister implements framework.EnqueueExtensions: any new record
// of a node that rejected the pod (or the node created anew) lifts the
// rejection.
func (*RejectedNodes) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdate},
		QueueingHintFn: isSchedulableAfterNodeChange,
	}}, nil
}

func isSchedulableAfterNodeChange(pod *framework.Pod, _, newObj any) (framework.QueueingHint, error) {
	n, ok := newObj.(*framework.Node)
	if !ok || n == nil {
		return framework.Queue, nil
	}
	if _, rejected := pod.Rejections()[n.Name]; rejected && !rejects(pod, n) {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

var _ framework.SignPlugin = (*RejectedNodes)(nil)

// AppendSignature implements framework.SignPlugin. A pod some node
// rejected is alone of its kind: its rejections are per pod.
func (*RejectedNodes) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	return sig, len(pod.Pod.Rejections()) == 0
}
