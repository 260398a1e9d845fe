package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/store"
	"github.com/berth-io/berth/tracing"
)

// startTraced runs a replica, on its own embedded etcd, tracing into tp
// (nil: tracing off), and returns a connection to it. A non-nil clientTP
// traces the client side too, so the server's span continues its trace.
func startTraced(tb testing.TB, tp, clientTP trace.TracerProvider) *grpc.ClientConn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(etcd.Close)
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", EtcdEndpoints: etcd.Endpoints(),
		Logger: zap.NewNop(), TracerProvider: tp,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			tb.Errorf("stop: %v", err)
		}
	})
	if err := srv.WaitSynced(ctx); err != nil {
		tb.Fatal(err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if clientTP != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(clientTP), otelgrpc.WithPropagators(tracing.Propagator()))))
	}
	conn, err := grpc.NewClient(srv.Addr(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// A SubmitPod can be followed from the call to the etcd commit to the
// scheduling cycle: the server span continues the client's trace, the
// admission span is its child, the Txn that wrote the pod links to the
// admission, and so does the pod's scheduling cycle, which runs later
// under no call; the Txn that binds the pod links to the cycle.
func TestSubmitPodIsTracedToItsSchedulingCycle(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	conn := startTraced(t, tp, tp)
	ctx := tctx(t)
	if _, err := berthv1.NewClusterServiceClient(conn).UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	resp, err := berthv1.NewPodServiceClient(conn).SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: pod("traced")})
	if err != nil {
		t.Fatal(err)
	}
	uid := resp.GetPod().GetUid()

	// The pod may take more than one cycle: a placement whose view
	// predates its shard's claim is refused and tried again. The cycle
	// that matters is the one whose binding landed.
	var cycle sdktrace.ReadOnlySpan
	eventually(t, 10*time.Second, "a scheduling cycle span for the pod whose binding's etcd.Txn links to it", func() error {
		ended := spans.Ended()
		for _, c := range ended {
			if c.Name() != "berth.schedule" || !hasAttr(c, "berth.pod.uid", uid) {
				continue
			}
			for _, s := range ended {
				if s.Name() == "etcd.Txn" && linksTo(s, c.SpanContext()) {
					cycle = c
					return nil
				}
			}
		}
		return fmt.Errorf("none among %d spans", len(ended))
	})
	ended := spans.Ended()
	client := only(t, ended, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == berthv1.PodService_SubmitPod_FullMethodName[1:] && s.SpanKind() == trace.SpanKindClient
	}, "client SubmitPod span")
	server := only(t, ended, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == berthv1.PodService_SubmitPod_FullMethodName[1:] && s.SpanKind() == trace.SpanKindServer
	}, "server SubmitPod span")
	if server.Parent().SpanID() != client.SpanContext().SpanID() || server.SpanContext().TraceID() != client.SpanContext().TraceID() {
		t.Errorf("server span's parent %v, want the client span %v", server.Parent(), client.SpanContext())
	}
	admit := only(t, ended, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "berth.admit" && s.SpanContext().TraceID() == server.SpanContext().TraceID()
	}, "admission span in the submit's trace")
	if admit.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("admission span's parent %v, want the server span %v", admit.Parent(), server.SpanContext())
	}
	only(t, ended, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "etcd.Txn" && linksTo(s, admit.SpanContext())
	}, "etcd.Txn span linked to the admission")
	if !linksTo(cycle, admit.SpanContext()) {
		t.Errorf("cycle span links %v, want a link to the admission span %v", cycle.Links(), admit.SpanContext())
	}
	if cycle.Parent().IsValid() {
		t.Errorf("cycle span has parent %v; it runs under no call and should be a root", cycle.Parent())
	}
}

func only(t *testing.T, spans []sdktrace.ReadOnlySpan, match func(sdktrace.ReadOnlySpan) bool, what string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		names := make([]string, len(spans))
		for i, s := range spans {
			names[i] = s.Name()
		}
		t.Fatalf("want one %s, found %d among %v", what, len(found), names)
	}
	return found[0]
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, a := range s.Attributes() {
		if a.Key == attribute.Key(key) && a.Value.AsString() == value {
			return true
		}
	}
	return false
}

func linksTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// BenchmarkSubmitPodRoundTrip is a SubmitPod over loopback gRPC, committed
// to etcd, with tracing off (no provider: the default) and on (every span
// sampled, exported to nowhere). allocs/op with tracing off is the
// untraced server's; the traced path's extra is what "on" adds.
func BenchmarkSubmitPodRoundTrip(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		var tp trace.TracerProvider
		if on {
			name = "on"
			sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { sdk.Shutdown(context.Background()) })
			tp = sdk
		}
		b.Run(name, func(b *testing.B) {
			pods := berthv1.NewPodServiceClient(startTraced(b, tp, nil))
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				if _, err := pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: pod(fmt.Sprintf("p-%d", i))}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
