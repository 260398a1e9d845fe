package scheduler

import (
	"context"
	"fmt"
	"sync"
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
		if lo, hi := now.Add(timeout), now.Add(timeout+d.window); dl.Before(lo) || dl.After(hi) {
			t.Fatalf("context at +%v ends at +%v, want within [+%v, +%v]", now.Sub(start), dl.Sub(start), lo.Sub(start), hi.Sub(start))
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

// Binding cycles ask from many goroutines at once; none may get a context
// that ends too soon.
func TestSharedDeadlineConcurrentCallers(t *testing.T) {
	const timeout = 640 * time.Millisecond
	d := newSharedDeadline(timeout)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				now := time.Now()
				if dl, _ := d.context(now).Deadline(); dl.Before(now.Add(timeout)) {
					errs <- fmt.Sprintf("deadline %v before now+timeout %v", dl, now.Add(timeout))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
