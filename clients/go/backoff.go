package berth

import (
	"context"
	"math"
	"time"

	cbackoff "github.com/cenkalti/backoff/v5"
)

// backoff is exponential backoff with "equal jitter": each wait is drawn
// from [d/2, d] where d doubles per retry up to max, so clients that failed
// together spread out without any of them retrying immediately. The
// sequence itself comes from cenkalti/backoff; this type only holds the
// client's two settings and maps them onto it.
type backoff struct {
	base, max time.Duration
}

// uncapped stands in for "no limit": high enough never to be reached, low
// enough that the jittered wait (a third above the interval) cannot
// overflow a Duration.
const uncapped = time.Duration(math.MaxInt64 / 2)

// sequence starts one run of retries; its NextBackOff is the wait before
// each retry in turn, and Reset starts over after a success.
func (b backoff) sequence() cbackoff.BackOff {
	if b.base <= 0 {
		return &cbackoff.ZeroBackOff{}
	}
	limit := b.max
	if limit <= 0 {
		limit = uncapped
	}
	// cenkalti draws from interval*[1-f, 1+f]; an interval of 3/4 d with
	// f = 1/3 is exactly [d/2, d].
	e := &cbackoff.ExponentialBackOff{
		InitialInterval:     min(b.base, limit) / 4 * 3,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         limit / 4 * 3,
	}
	e.Reset()
	return cappedSequence{e, limit}
}

// cappedSequence keeps float rounding in the library's jitter from ever
// landing a nanosecond past the limit.
type cappedSequence struct {
	*cbackoff.ExponentialBackOff
	limit time.Duration
}

func (s cappedSequence) NextBackOff() time.Duration {
	return min(s.ExponentialBackOff.NextBackOff(), s.limit)
}

// delay returns the wait before retry number attempt (1 for the first
// retry) of a fresh sequence. Callers count few attempts (a unary call's
// are bounded by WithMaxAttempts), so replaying the sequence is cheap.
func (b backoff) delay(attempt uint) time.Duration {
	if b.base <= 0 || attempt == 0 {
		return 0
	}
	seq := b.sequence()
	var d time.Duration
	for range attempt {
		d = seq.NextBackOff()
	}
	return d
}

// waitNext blocks for seq's next wait or until ctx ends, whichever is first.
func waitNext(ctx context.Context, seq cbackoff.BackOff) error {
	if !sleep(ctx, seq.NextBackOff()) {
		return ctx.Err()
	}
	return nil
}
