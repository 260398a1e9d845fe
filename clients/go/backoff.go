package berth

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with "equal jitter": half the delay is
// fixed and half random, so clients that failed together spread out without
// any of them retrying immediately.
type backoff struct {
	base, max time.Duration
}

// delay returns the wait before retry number attempt (1 for the first retry).
func (b backoff) delay(attempt uint) time.Duration {
	if b.base <= 0 || attempt == 0 {
		return 0
	}
	d := b.base
	for i := uint(1); i < attempt && (b.max <= 0 || d < b.max) && d <= math.MaxInt64/2; i++ {
		d *= 2
	}
	if b.max > 0 && d > b.max {
		d = b.max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// wait blocks for the delay of attempt or until ctx ends, whichever is first.
func (b backoff) wait(ctx context.Context, attempt uint) error {
	d := b.delay(attempt)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
