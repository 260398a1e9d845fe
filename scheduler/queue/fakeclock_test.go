package queue

import (
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when Step is called.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	// afterCalled receives (without blocking) each time After is called, so
	// a test can wait until a goroutine is waiting on the clock.
	afterCalled chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

var _ Clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), afterCalled: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	select {
	case c.afterCalled <- struct{}{}:
	default:
	}
	return ch
}

// Step advances the clock and fires the waiters that are due.
func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}
