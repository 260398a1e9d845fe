// Package defaultbinder binds pods through the framework's Binder.
package defaultbinder

import (
	"context"
	"errors"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.DefaultBinder

// errNoBinder is returned when the framework has no Binder.
var errNoBinder = errors.New("defaultbinder: no binder configured")

// DefaultBinder stores the binding with handle.Binder().
type DefaultBinder struct {
	handle framework.Handle
}

var _ framework.BindPlugin = (*DefaultBinder)(nil)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	return &DefaultBinder{handle: h}, nil
}

// Name implements framework.Plugin.
func (*DefaultBinder) Name() string { return Name }

// Bind implements framework.BindPlugin; an error from the Binder becomes
// an Error status, so the pod is retried.
func (b *DefaultBinder) Bind(ctx context.Context, _ *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	binder := b.handle.Binder()
	if binder == nil {
		return framework.AsStatus(errNoBinder)
	}
	return framework.AsStatus(binder.Bind(ctx, pod, nodeName))
}
