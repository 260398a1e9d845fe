package store

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Units of two writers that share a Txn: the Txn gets one span, linked to
// both writers' spans, and each writer's span an event naming the Txn.
func TestTxnSpanLinksTheWritersItCarries(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracer := tp.Tracer("test")

	c, rec := stalled(t, 1, 64)
	c.tracer = tracer // before submit: the worker reads it under c.mu
	ctx := testCtx(t)
	ctxA, writerA := tracer.Start(ctx, "writer-a")
	ctxB, writerB := tracer.Start(ctx, "writer-b")
	units := []*commitUnit{putUnit(ctxA, keyPrefix(t)+"a", "v"), putUnit(ctxB, keyPrefix(t)+"b", "v")}
	if err := c.submit(units...); err != nil {
		t.Fatal(err)
	}
	rec.release()
	for _, u := range units {
		if res := c.wait(ctx, u); res.err != nil {
			t.Fatal(res.err)
		}
	}
	writerA.End()
	writerB.End()

	var txn sdktrace.ReadOnlySpan
	events := map[string]int{}
	for _, s := range spans.Ended() {
		switch s.Name() {
		case txnSpanName:
			if txn != nil {
				t.Fatalf("want one Txn span (the first Txn ran untraced), got a second: %v", s.Links())
			}
			txn = s
		case "writer-a", "writer-b":
			for _, e := range s.Events() {
				if e.Name == "etcd txn sent" {
					events[s.Name()]++
				}
			}
		}
	}
	if txn == nil {
		t.Fatal("no Txn span")
	}
	linked := map[trace.SpanID]bool{}
	for _, l := range txn.Links() {
		linked[l.SpanContext.SpanID()] = true
	}
	for _, w := range []trace.Span{writerA, writerB} {
		if !linked[w.SpanContext().SpanID()] {
			t.Errorf("Txn span does not link writer span %v; links %v", w.SpanContext().SpanID(), txn.Links())
		}
	}
	if txn.Parent().IsValid() {
		t.Errorf("Txn span has parent %v; it serves many writers and should have none", txn.Parent())
	}
	var rev int64
	for _, a := range txn.Attributes() {
		if a.Key == attribute.Key("berth.txn.revision") {
			rev = a.Value.AsInt64()
		}
	}
	if want := c.wait(ctx, units[0]).rev; rev != want {
		t.Errorf("Txn span revision %d, want %d", rev, want)
	}
	if events["writer-a"] != 1 || events["writer-b"] != 1 {
		t.Errorf("txn events on the writers' spans: %v, want one each", events)
	}
}
