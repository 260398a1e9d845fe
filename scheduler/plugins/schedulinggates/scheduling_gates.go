// Package schedulinggates holds pods back from the active queue while
// they carry scheduling gates, which their owner removes when the pod may
// be scheduled.
package schedulinggates

import (
	"context"
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.SchedulingGates

// SchedulingGates gates pods at PreEnqueue. Kube:
// pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go.
type SchedulingGates struct{}

var (
	_ framework.PreEnqueuePlugin  = (*SchedulingGates)(nil)
	_ framework.EnqueueExtensions = (*SchedulingGates)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &SchedulingGates{}, nil
}

// Name implements framework.Plugin.
func (*SchedulingGates) Name() string { return Name }

// PreEnqueue implements framework.PreEnqueuePlugin: a pod with any gate
// waits, UnschedulableAndUnresolvable, until an update removes them all.
func (*SchedulingGates) PreEnqueue(_ context.Context, pod *framework.Pod) *framework.Status {
	if len(pod.SchedulingGates()) == 0 {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("waiting for scheduling gates: %v", pod.SchedulingGates()))
}

// EventsToRegister implements framework.EnqueueExtensions: only an update
// of the gated pod's own gates can release it.
func (*SchedulingGates) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionUpdatePodSchedulingGates},
		QueueingHintFn: isSchedulableAfterGatesUpdate,
	}}, nil
}

// isSchedulableAfterGatesUpdate queues the pod when the update is of this
// very pod (same namespace, name and UID) and left it without gates.
func isSchedulableAfterGatesUpdate(pod *framework.Pod, _, newObj any) (framework.QueueingHint, error) {
	updated, ok := newObj.(*framework.Pod)
	if !ok || updated == nil {
		return framework.Queue, nil
	}
	if updated.Namespace != pod.Namespace || updated.Name != pod.Name || updated.UID != pod.UID {
		return framework.QueueSkip, nil
	}
	if len(updated.SchedulingGates()) > 0 {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}
