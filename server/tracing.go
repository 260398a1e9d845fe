package server

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/tracing"
)

// admitSpanName names the span of one SubmitPod or SubmitPods call's
// admission: defaulting, validation and the store write, up to the commit.
const admitSpanName = "berth.admit"

// tracingOption is the otelgrpc stats handler: a server span per call,
// continuing the caller's W3C trace context. Health checks are left out,
// or probes would drown the traces; metrics stay Prometheus's.
func tracingOption(tp trace.TracerProvider) grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator()),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(filters.Not(filters.HealthCheck())),
	))
}

// admitTracer traces admissions and tells the replica which span admitted
// each accepted pod. Its zero value traces nothing and allocates nothing.
type admitTracer struct {
	tracer      trace.Tracer
	submitting  func(ctx context.Context, pod string)
	unsubmitted func(ctx context.Context, pod string)
}

// start opens the admission span of a call submitting n pods; end closes
// it with the call's error, if any.
func (a admitTracer) start(ctx context.Context, n int) (_ context.Context, end func(error)) {
	if a.tracer == nil {
		return ctx, endAdmitNothing
	}
	ctx, span := a.tracer.Start(ctx, admitSpanName, trace.WithAttributes(attribute.Int("berth.pods", n)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

func endAdmitNothing(error) {}

// storing tells the replica, before the store write, that ctx's admission
// span is storing pod, so its scheduling cycle can link back to it.
func (a admitTracer) storing(ctx context.Context, pod *berthv1.Pod) {
	if a.tracer != nil && a.submitting != nil {
		a.submitting(ctx, pod.GetNamespace()+"/"+pod.GetName())
	}
}

// stored records the store's answer to a storing: an accepted pod is an
// event on the admission span, a refused one is forgotten for linking.
func (a admitTracer) stored(ctx context.Context, pod *berthv1.Pod, err error) {
	if a.tracer == nil {
		return
	}
	if err != nil {
		if a.unsubmitted != nil {
			a.unsubmitted(ctx, pod.GetNamespace()+"/"+pod.GetName())
		}
		return
	}
	trace.SpanFromContext(ctx).AddEvent("pod accepted", trace.WithAttributes(
		attribute.String("berth.pod", pod.GetNamespace()+"/"+pod.GetName()), attribute.String("berth.pod.uid", pod.GetUid())))
}
