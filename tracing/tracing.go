// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables. Tracing is off unless those variables ask for an
// exporter: Setup then returns a nil provider, and every instrumented path
// in Berth checks for nil before doing any tracing work, so a replica that
// does not trace pays nothing for it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names the tracers Berth's own spans come from.
const InstrumentationName = "github.com/berth-io/berth"

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names the service.
const DefaultServiceName = "berth"

// Propagator is what Berth reads and writes on the wire: W3C trace context
// and baggage, whatever the process-wide propagator is.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Enabled reports whether the environment turns tracing on:
// OTEL_TRACES_EXPORTER=otlp, or, with OTEL_TRACES_EXPORTER unset, an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off. Unlike the OpenTelemetry default
// (otlp), an unset environment means off: a replica should not try to
// reach a collector nobody configured.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: only otlp and none are supported", exp)
	}
}

// Setup builds a tracer provider exporting over OTLP/gRPC when the
// environment turns tracing on (see Enabled), and makes it, with the W3C
// propagators, the process-wide default so libraries (the Go client's
// otelgrpc handler) pick it up. The exporter, sampler and batching read
// their own OTEL_* variables (OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*); the resource reads
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
//
// When tracing is off it returns a nil provider and a shutdown that does
// nothing, and leaves the process-wide no-op provider in place. shutdown
// flushes the spans still buffered; call it once the replica has stopped.
func Setup(ctx context.Context, getenv func(string) string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, func(context.Context) error { return nil }, err
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	res := resource.Default()
	if getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, err = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", DefaultServiceName)))
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("tracing: resource: %w", err), exp.Shutdown(ctx))
		}
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(sdk)
	otel.SetTextMapPropagator(Propagator())
	return sdk, sdk.Shutdown, nil
}
