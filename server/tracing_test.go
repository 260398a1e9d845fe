package server

import (
	"context"
	"testing"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// With tracing off the admission hooks must add nothing to a submit.
func TestAdmitTracerOffAllocatesNothing(t *testing.T) {
	var off admitTracer
	ctx := context.Background()
	p := &berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u"}
	if n := testing.AllocsPerRun(100, func() {
		ctx, end := off.start(ctx, 1)
		off.storing(ctx, p)
		off.stored(ctx, p, nil)
		end(nil)
	}); n != 0 {
		t.Fatalf("untraced admission allocates %v times", n)
	}
}
