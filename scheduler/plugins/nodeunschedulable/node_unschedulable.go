// Package nodeunschedulable keeps pods off cordoned nodes.
package nodeunschedulable

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.NodeUnschedulable

// ErrReasonUnschedulable is kube's message for a cordoned node.
const ErrReasonUnschedulable = "node(s) were unschedulable"

// unschedulableTaint is the taint a pod must tolerate to use a cordoned
// node, as kube-scheduler checks it.
var unschedulableTaint = framework.Taint{Key: framework.TaintNodeUnschedulable, Effect: framework.TaintEffectNoSchedule}

// NodeUnschedulable rejects nodes marked Unschedulable unless the pod
// tolerates the unschedulable taint.
type NodeUnschedulable struct{}

var (
	_ framework.FilterPlugin      = (*NodeUnschedulable)(nil)
	_ framework.EnqueueExtensions = (*NodeUnschedulable)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &NodeUnschedulable{}, nil
}

// Name implements framework.Plugin.
func (*NodeUnschedulable) Name() string { return Name }

// Filter implements framework.FilterPlugin. Kube:
// pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	if nodeInfo.Unschedulable() && !fits(pod.Pod, nodeInfo.Node()) {
		return cordoned
	}
	return nil
}

// cordoned is Filter's rejection (framework.NewRejection).
var cordoned = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReasonUnschedulable)

func fits(pod *framework.Pod, node *framework.Node) bool {
	return !node.Unschedulable || framework.TolerationsTolerateTaint(pod.Tolerations, &unschedulableTaint)
}

// EventsToRegister implements framework.EnqueueExtensions: a node added,
// or uncordoned (which the cluster reports as a taint change), may now
// take the pod.
func (*NodeUnschedulable) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeTaint},
		QueueingHintFn: isSchedulableAfterNodeChange,
	}}, nil
}

func isSchedulableAfterNodeChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	newNode, ok := newObj.(*framework.Node)
	if !ok || newNode == nil {
		return framework.Queue, nil
	}
	if !fits(pod, newNode) {
		return framework.QueueSkip, nil
	}
	if oldNode, ok := oldObj.(*framework.Node); ok && oldNode != nil && fits(pod, oldNode) {
		// It already fitted: this change is not what rejected the pod.
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

var _ framework.SignPlugin = (*NodeUnschedulable)(nil)

// AppendSignature implements framework.SignPlugin: the verdict depends on
// the pod's tolerations only.
func (*NodeUnschedulable) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	return framework.AppendSigTolerations(sig, pod.Pod.Tolerations), true
}
