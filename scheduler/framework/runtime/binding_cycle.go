package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// RunReservePluginsReserve runs Reserve plugins and stops at the first
// failure; the caller must then run RunReservePluginsUnreserve.
func (f *Framework) RunReservePluginsReserve(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	for _, pl := range f.reserve {
		st := pl.Reserve(ctx, state, pod, nodeName)
		if st.IsSuccess() {
			continue
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running Reserve plugin %q: %w", pl.Name(), st.AsError()))
	}
	return nil
}

// RunReservePluginsUnreserve runs every Unreserve in reverse order.
func (f *Framework) RunReservePluginsUnreserve(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) {
	for i := len(f.reserve) - 1; i >= 0; i-- {
		f.reserve[i].Unreserve(ctx, state, pod, nodeName)
	}
}

// RunPermitPlugins runs Permit plugins. A rejection or error stops them.
// If any asked to wait (and none rejected), the pod becomes a waiting pod
// with each plugin's timeout (capped at 15 minutes) and Wait is returned;
// WaitOnPermit then blocks for the outcome.
func (f *Framework) RunPermitPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	var waits map[string]time.Duration
	for _, pl := range f.permit {
		st, timeout := pl.Permit(ctx, state, pod, nodeName)
		if st.IsSuccess() {
			continue
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		if !st.IsWait() {
			return framework.AsStatus(fmt.Errorf("running Permit plugin %q: %w", pl.Name(), st.AsError())).WithPlugin(pl.Name())
		}
		if waits == nil {
			waits = map[string]time.Duration{}
		}
		waits[pl.Name()] = min(timeout, maxPermitTimeout)
	}
	if waits == nil {
		return nil
	}
	f.waitingPods.add(newWaitingPod(pod, waits, f.clock))
	return framework.NewStatus(framework.Wait, fmt.Sprintf("one or more plugins asked to wait and no plugin rejected pod %q", pod.Name))
}

// WillWaitOnPermit reports whether the pod is held at Permit.
func (f *Framework) WillWaitOnPermit(pod *framework.Pod) bool {
	return f.waitingPods.get(framework.WaitingPodKey(pod)) != nil
}

// WaitOnPermit blocks until a waiting pod is allowed (nil), rejected or
// timed out (Unschedulable, naming the plugin), or ctx ends (Error; the
// pod is rejected so later Allow calls are ignored). It returns nil at
// once for a pod that is not waiting.
func (f *Framework) WaitOnPermit(ctx context.Context, pod *framework.Pod) *framework.Status {
	key := framework.WaitingPodKey(pod)
	wp := f.waitingPods.get(key)
	if wp == nil {
		return nil
	}
	defer f.waitingPods.remove(key)
	var s *framework.Status
	select {
	case s = <-wp.s:
	case <-ctx.Done():
		wp.Reject("", "waiting on permit cancelled")
		return framework.AsStatus(fmt.Errorf("waiting on permit for pod: %w", context.Cause(ctx)))
	}
	if s.IsSuccess() || s.IsRejected() {
		return s
	}
	return framework.AsStatus(fmt.Errorf("waiting on permit for pod: %w", s.AsError())).WithPlugin(s.Plugin())
}

// IterateOverWaitingPods implements framework.Handle.
func (f *Framework) IterateOverWaitingPods(fn func(framework.WaitingPod)) { f.waitingPods.iterate(fn) }

// GetWaitingPod implements framework.Handle.
func (f *Framework) GetWaitingPod(key string) framework.WaitingPod {
	if wp := f.waitingPods.get(key); wp != nil {
		return wp
	}
	return nil
}

// RejectWaitingPod implements framework.Handle.
func (f *Framework) RejectWaitingPod(key string) bool {
	if wp := f.waitingPods.get(key); wp != nil {
		wp.Reject("", "removed")
		return true
	}
	return false
}

// RunPreBindPlugins runs PreBind plugins and stops at the first failure.
func (f *Framework) RunPreBindPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	for _, pl := range f.preBind {
		st := pl.PreBind(ctx, state, pod, nodeName)
		if st.IsSuccess() {
			continue
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running PreBind plugin %q: %w", pl.Name(), st.AsError()))
	}
	return nil
}

// RunBindPlugins runs Bind plugins until one does not Skip; with none (or
// all skipping) it returns Skip.
func (f *Framework) RunBindPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	st := framework.SkipStatus()
	for _, pl := range f.bind {
		st = pl.Bind(ctx, state, pod, nodeName)
		if st.IsSkip() {
			continue
		}
		if st.IsSuccess() {
			return nil
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running Bind plugin %q: %w", pl.Name(), st.AsError()))
	}
	return st
}

// RunPostBindPlugins tells PostBind plugins about a binding.
func (f *Framework) RunPostBindPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) {
	for _, pl := range f.postBind {
		pl.PostBind(ctx, state, pod, nodeName)
	}
}
