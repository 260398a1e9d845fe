package replica

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func spanCtx(b byte) context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{b}, SpanID: trace.SpanID{b}, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// A refused submission must not leave its span for the cycles of the pod
// that holds the name, and must not drop a later submission's span.
func TestSubmitLinksForgetOnlyTheirOwnSpan(t *testing.T) {
	l := newSubmitLinks(4)
	first, refused := spanCtx(1), spanCtx(2)
	l.remember(first, "ns/p")
	l.forget(refused, "ns/p")
	if sc, ok := l.lookup("ns/p"); !ok || !sc.Equal(trace.SpanContextFromContext(first)) {
		t.Fatalf("forgetting another span dropped the pod's link: %v %v", sc, ok)
	}
	l.remember(refused, "ns/p")
	l.forget(refused, "ns/p")
	if _, ok := l.lookup("ns/p"); ok {
		t.Fatal("a refused submission's span is still linked")
	}
}

// The links are bounded: the oldest pods are forgotten first.
func TestSubmitLinksAreBounded(t *testing.T) {
	l := newSubmitLinks(2)
	for _, pod := range []string{"ns/a", "ns/b", "ns/c"} {
		l.remember(spanCtx(1), pod)
	}
	if _, ok := l.lookup("ns/a"); ok {
		t.Error("the oldest pod is still remembered past the bound")
	}
	if _, ok := l.lookup("ns/c"); !ok {
		t.Error("the newest pod is not remembered")
	}
}
