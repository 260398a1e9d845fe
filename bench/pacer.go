package bench

import (
	"context"
	"time"
)

// pacer spreads n submissions over time at a fixed rate, so latency is
// measured under a steady offered load rather than a burst that queues
// behind itself: at an open-loop rate below capacity, submit-to-bound is
// what a client of a busy service would see.
type pacer struct {
	rate  float64 // pods per second
	batch int     // most pods per call
	start time.Time
	sent  int
}

// pacerTickMin bounds how often the pacer wakes. Latency runs from each
// pod's due time, so a pod that falls due just after a tick waits up to a
// tick before it is sent, and that wait is charged to the server: the tick
// must stay well under the latencies measured (10 ms ticks added ~5 ms to
// every median). At high rates a tick still sends what fell due since the
// last one in a call, at 20,000 pods/s twenty pods a tick.
const pacerTickMin = time.Millisecond

// pacerTick is how often the pacer wakes: every pacerTickMin, or once a pod
// at rates below one per pacerTickMin.
func pacerTick(rate float64) time.Duration {
	return max(pacerTickMin, time.Duration(float64(time.Second)/rate))
}

// dueAt is when pod i should be sent: one slot per 1/rate from start, the
// first at start. Latency under --rate runs from here, so a pod the pacer
// or the calls in flight hold back is measured as late, as its client
// would see it.
func (p *pacer) dueAt(i int) time.Time {
	return p.start.Add(time.Duration(float64(i) * float64(time.Second) / p.rate))
}

// due is how many more of n pods should be sent by now: those whose dueAt
// has come.
func (p *pacer) due(now time.Time, n int) int {
	elapsed := max(now.Sub(p.start), 0)
	owed := min(int(elapsed.Seconds()*p.rate)+1, n)
	// The estimate can be one off where float rounding differs from
	// dueAt's; dueAt decides, so no pod is sent before the time it is
	// measured from.
	for owed < n && !p.dueAt(owed).After(now) {
		owed++
	}
	for owed > 0 && p.dueAt(owed-1).After(now) {
		owed--
	}
	return max(owed-p.sent, 0)
}

// run sends n pods as [lo, hi) ranges of at most batch, starting now and
// then on each tick, until all are sent or ctx ends. send may block (calls
// in flight are bounded): the pods it delays go out together on a later
// tick, so the total stays on schedule while the submitter keeps up.
func (p *pacer) run(ctx context.Context, start time.Time, ticks <-chan time.Time, n int, send func(lo, hi int)) error {
	p.start = start
	now := start
	for {
		for k := p.due(now, n); k > 0; {
			c := min(k, p.batch)
			send(p.sent, p.sent+c)
			p.sent += c
			k -= c
		}
		if p.sent >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now = <-ticks:
		}
	}
}
