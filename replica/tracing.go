package replica

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/tracing"
)

// cycleSpanName names the span of one scheduling cycle.
const cycleSpanName = "berth.schedule"

// maxSubmitLinks bounds the submits remembered for linking: the oldest are
// forgotten first. Pods another replica schedules are never looked up here,
// so without a bound they would be remembered for ever.
const maxSubmitLinks = 1 << 16

// submitLinks remembers, by pod uid, the span that admitted each pod this
// replica accepted, so the pod's scheduling cycles, which run later and
// under no caller's trace, can link to it. Only the accepting replica
// knows the link: a pod scheduled by another replica gets an unlinked
// cycle span.
type submitLinks struct {
	mu    sync.Mutex
	spans map[string]trace.SpanContext
	order []string // uids, oldest first, at most maxSubmitLinks
	max   int
}

func newSubmitLinks(max int) *submitLinks {
	return &submitLinks{spans: map[string]trace.SpanContext{}, max: max}
}

// remember records ctx's span as uid's submit; a resubmission replaces it.
func (l *submitLinks) remember(ctx context.Context, uid string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || uid == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.spans[uid]; !ok {
		if len(l.order) == l.max {
			delete(l.spans, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, uid)
	}
	l.spans[uid] = sc
}

// lookup returns uid's submit span, if remembered. It stays remembered:
// a pod that does not fit is tried again, and each try links back.
func (l *submitLinks) lookup(uid string) (trace.SpanContext, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc, ok := l.spans[uid]
	return sc, ok
}

// cycleTracer traces scheduling cycles with OpenTelemetry for the core.
type cycleTracer struct {
	tracer  trace.Tracer
	submits *submitLinks
}

var _ scheduler.Tracer = cycleTracer{}

// StartCycle starts a root span: the cycle is not part of any call, and
// links to the submit that queued the pod when this replica accepted it.
func (t cycleTracer) StartCycle(ctx context.Context, pod *framework.Pod) (context.Context, func()) {
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(
		attribute.String("berth.pod", pod.Key()), attribute.String("berth.pod.uid", pod.UID))}
	if sc, ok := t.submits.lookup(pod.UID); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := t.tracer.Start(ctx, cycleSpanName, opts...)
	return ctx, func() { span.End() }
}

// tracingOn wires tracing into the replica's parts when a provider is
// configured; without one every part keeps its untraced, free path.
func (r *Replica) tracingOn() bool { return r.cfg.TracerProvider != nil }

func (r *Replica) tracer() trace.Tracer {
	return r.cfg.TracerProvider.Tracer(tracing.InstrumentationName)
}
