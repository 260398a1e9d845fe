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

// submitLinks remembers, by pod ("namespace/name"), the span that admitted
// each pod this replica stored, so the pod's scheduling cycles, which run
// later and under no caller's trace, can link to it. It is told before the
// store write, since a cycle may start before the call returns. Only the
// accepting replica knows the link: a pod scheduled by another replica
// gets an unlinked cycle span.
type submitLinks struct {
	mu    sync.Mutex
	spans map[string]trace.SpanContext
	order []string // pods, oldest first, at most maxSubmitLinks
	max   int
}

func newSubmitLinks(max int) *submitLinks {
	return &submitLinks{spans: map[string]trace.SpanContext{}, max: max}
}

// remember records ctx's span as pod's submit; a resubmission replaces it.
func (l *submitLinks) remember(ctx context.Context, pod string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || pod == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.spans[pod]; !ok {
		if len(l.order) == l.max {
			delete(l.spans, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, pod)
	}
	l.spans[pod] = sc
}

// forget drops pod's submit if it is still ctx's span: the store refused
// that submission, so the pod's cycles (if a pod of that name exists)
// must not link to it. Its place in order is reclaimed with the oldest.
func (l *submitLinks) forget(ctx context.Context, pod string) {
	sc := trace.SpanContextFromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.spans[pod]; ok && cur.Equal(sc) {
		delete(l.spans, pod)
	}
}

// lookup returns pod's submit span, if remembered. It stays remembered:
// a pod that does not fit is tried again, and each try links back.
func (l *submitLinks) lookup(pod string) (trace.SpanContext, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc, ok := l.spans[pod]
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
	if sc, ok := t.submits.lookup(pod.Key()); ok {
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
