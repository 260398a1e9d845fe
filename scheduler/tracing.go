package scheduler

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
)

// Tracer lets a tracing system follow scheduling cycles without the core
// knowing which one: the replica implements it with OpenTelemetry. A nil
// Config.Tracer, the default, traces nothing and costs nothing.
type Tracer interface {
	// StartCycle is called as pod's scheduling cycle begins, on the shard's
	// loop; the returned context is the cycle's (plugins see it), and end
	// is called once when the cycle is over, before the binding cycle's
	// commit lands.
	StartCycle(ctx context.Context, pod *framework.Pod) (_ context.Context, end func())
}

// startCycle starts pod's cycle with the configured Tracer, if any.
func (s *Scheduler) startCycle(ctx context.Context, pod *framework.Pod) (context.Context, func()) {
	if s.cfg.Tracer == nil {
		return ctx, endNothing
	}
	return s.cfg.Tracer.StartCycle(ctx, pod)
}

// bindContext is what a binding cycle's context derives from: never the
// loop's cancellation (a shutdown must not abandon a commit halfway), but,
// when tracing, the scheduling cycle's values, so the binding's commit can
// link to the cycle's span. Untraced, it is Background: nothing to carry,
// nothing allocated.
func (s *Scheduler) bindContext(cycle context.Context) context.Context {
	if s.cfg.Tracer == nil {
		return context.Background()
	}
	return context.WithoutCancel(cycle)
}

// endNothing is a package-level func so an untraced cycle allocates no
// closure.
func endNothing() {}
