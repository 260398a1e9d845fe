package scheduler

import (
	"context"
	"sync/atomic"
	"time"
)

// sharedDeadline hands out contexts that end a timeout after they were
// asked for, give or take a window: every caller within one window shares
// one context and so one runtime timer. A context per binding cycle cost a
// timer armed and stopped per pod, which was over half of a binding
// cycle's own CPU in BenchmarkLoops. The contexts carry no values and are
// never cancelled early: each ends at its deadline by itself.
type sharedDeadline struct {
	timeout, window time.Duration

	current atomic.Pointer[deadlineSlot]
}

type deadlineSlot struct {
	ctx context.Context
	end time.Time
}

func newSharedDeadline(timeout time.Duration) *sharedDeadline {
	// A 64th of the timeout: at the default 30s, a binding may run 0.47s
	// longer than asked, and two new timers a second replace thousands.
	return &sharedDeadline{timeout: timeout, window: timeout / 64}
}

// context returns a context whose deadline is at least timeout and at most
// timeout+window after now.
func (d *sharedDeadline) context(now time.Time) context.Context {
	want := now.Add(d.timeout)
	s := d.current.Load()
	if s != nil && !s.end.Before(want) {
		return s.ctx
	}
	// Renewal is lock-free: a mutex here convoyed every binding cycle that
	// arrived while the slot was stale, a thousand goroutines handed the
	// lock one at a time (most of BenchmarkLoops' lock wait). A caller that
	// loses the swap keeps the context it made, which is as good.
	end := want.Add(d.window)
	// The context ends at its deadline on its own; callers still holding
	// it must not be cut short, so it is never cancelled.
	ctx, cancel := context.WithDeadline(context.Background(), end)
	_ = cancel
	d.current.CompareAndSwap(s, &deadlineSlot{ctx: ctx, end: end})
	return ctx
}

// bindDeadline bounds a binding cycle by BindTimeout. A cycle with nothing
// to carry shares its deadline; a traced one carries its cycle's span, so
// it needs a context of its own.
func (s *Scheduler) bindDeadline(base context.Context) (context.Context, context.CancelFunc) {
	if base == context.Background() {
		return s.deadlines.context(time.Now()), func() {}
	}
	return context.WithTimeout(base, s.cfg.BindTimeout)
}
