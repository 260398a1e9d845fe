// Package queuesort orders the active queue by priority, then arrival.
package queuesort

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.PrioritySort

// PrioritySort puts higher priority first and, at equal priority, the pod
// that entered the queue first.
type PrioritySort struct{}

var _ framework.QueueSortPlugin = (*PrioritySort)(nil)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &PrioritySort{}, nil
}

// Name implements framework.Plugin.
func (*PrioritySort) Name() string { return Name }

// Less implements framework.QueueSortPlugin.
func (*PrioritySort) Less(a, b *framework.QueuedPodInfo) bool {
	pa, pb := a.Pod.Priority, b.Pod.Priority
	return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
}
