package scheduler

import (
	"context"
	"testing"
	"time"
)

func TestSharedDeadlineBoundsEveryCaller(t *testing.T) {
	const timeout = 64 * time.Second
	d := newSharedDeadline(timeout)
	start := time.Now()
	check := func(now time.Time) context.Context {
		t.Helper()
		ctx := d.context(now)
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatalf("context at +%v has no deadline", now.Sub(start))
		}
		if min, max := now.Add(timeout), now.Add(timeout+d.window); dl.Before(min) || dl.After(max) {
			t.Fatalf("context at +%v ends at +%v, want within [+%v, +%v]", now.Sub(start), dl.Sub(start), min.Sub(start), max.Sub(start))
		}
		return ctx
	}
	first := check(start)
	if got := check(start.Add(d.window / 2)); got != first {
		t.Error("a caller within the window got a context of its own; want the shared one")
	}
	if got := check(start.Add(d.window + time.Millisecond)); got == first {
		t.Error("a caller past the window got the old context, which would end too soon")
	}
}

func TestSharedDeadlineEnds(t *testing.T) {
	d := newSharedDeadline(64 * time.Millisecond)
	ctx := d.context(time.Now())
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("shared context did not end by itself")
	}
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Err = %v, want DeadlineExceeded", ctx.Err())
	}
	if fresh := d.context(time.Now()); fresh.Err() != nil {
		t.Fatalf("context after the old one ended: Err = %v, want a live one", fresh.Err())
	}
}
