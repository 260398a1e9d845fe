package queue

import (
	"testing"
	"time"
)

// A pod handed back from outside an attempt (its node rejected it) waits
// out the backoff of the attempts it is charged with, then becomes active.
func TestAddWithBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		wait     time.Duration
	}{{0, time.Second}, {1, time.Second}, {3, 4 * time.Second}} {
		q, clock := newTestQueue(t)
		q.AddWithBackoff(newPod("p", 0), tc.attempts)
		checkPools(t, q, pools{Backoff: []string{key("p")}})
		clock.Step(tc.wait - time.Nanosecond)
		q.flushBackoffCompleted()
		checkPools(t, q, pools{Backoff: []string{key("p")}})
		clock.Step(time.Nanosecond)
		q.flushBackoffCompleted()
		checkPools(t, q, pools{Active: []string{key("p")}})
	}
}

// A pod already queued is only updated: it keeps its pool.
func TestAddWithBackoffQueuedPod(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add(newPod("p", 0))
	q.AddWithBackoff(newPod("p", 0), 1)
	checkPools(t, q, pools{Active: []string{key("p")}})
}
