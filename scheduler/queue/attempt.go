package queue

import (
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
)

// How a popped pod's attempt ends: Done when it was scheduled,
// AddUnschedulableIfNotPresent when it failed, Requeue when it lost a race.
// Each ends the in-flight record the attempt kept, and the last two decide
// from that record which pool the pod goes back to.

// Done ends the attempt of a popped pod that will not come back to the
// queue (it was scheduled). AddUnschedulableIfNotPresent and Requeue end the
// attempt themselves. Calling Done for a pod not in flight is a no-op.
//
// Done never waits for the lock: a group commit ends hundreds of attempts
// at once, and their Dones queued on the lock ahead of the shard loop's
// Pop. When the lock is busy, the key is left for its holder's successor,
// since every method that reads the in-flight state first ends the
// attempts left to it (lock), so none of them can tell the difference.
func (q *PriorityQueue) Done(key string) {
	if q.mu.TryLock() {
		q.endLeftLocked()
		q.inFlight.end(key)
		q.mu.Unlock()
		return
	}
	q.leftDone.Push(key)
}

// lock takes mu and ends the attempts Done left meanwhile. Every method
// that takes mu uses it, so the in-flight state they see has every Done
// that returned before they locked.
func (q *PriorityQueue) lock() {
	q.mu.Lock()
	q.endLeftLocked()
}

func (q *PriorityQueue) endLeftLocked() {
	q.leftDone.Drain(q.inFlight.end)
}

// AddUnschedulableIfNotPresent takes back a pod whose attempt failed, with
// the plugins that rejected it in qpi.UnschedulablePlugins (and
// PendingPlugins). It goes to:
//   - backoffQ, if no plugin is named (an internal error: no event can be
//     matched to it), if its own spec changed during the attempt, or if an
//     event that arrived during the attempt may help it (per the queueing
//     hints of its rejecting plugins);
//   - activeQ, if such an event came from a Pending plugin's registration;
//   - the unschedulable pool otherwise, until a relevant event or the flush.
//
// A pod deleted during its attempt is dropped. It is an error to hand back a
// pod that is already queued.
func (q *PriorityQueue) AddUnschedulableIfNotPresent(qpi *framework.QueuedPodInfo) error {
	key := qpi.Pod.Key()
	q.lock()
	defer q.mu.Unlock()
	st := strategySkip
	if f := q.inFlight.get(key); f != nil {
		defer q.inFlight.end(key)
		if f.deleted {
			return nil
		}
		if f.latest != nil {
			setPod(qpi, f.latest, f.specChanged)
		}
		if f.specChanged || f.activated {
			st = strategyAfterBackoff
		}
		if f.promoted && !f.specChanged {
			st = strategyImmediately
		}
		if st == strategySkip {
			for _, ev := range q.inFlight.eventsSince(f) {
				if s := q.worth(qpi, ev.event, ev.oldObj, ev.newObj); s > st {
					if st = s; st == strategyImmediately {
						break
					}
				}
			}
		}
	}
	if _, ok := q.entries[key]; ok {
		return fmt.Errorf("queue: pod %s is already queued", key)
	}
	if len(qpi.UnschedulablePlugins) == 0 && len(qpi.PendingPlugins) == 0 {
		st = max(st, strategyAfterBackoff)
	}
	qpi.Timestamp = q.opts.clock.Now()
	if f := q.inFlight.get(key); f != nil && f.promoted && !f.specChanged {
		qpi.Timestamp = arrival(qpi)
	}
	e := &entry{qpi: qpi, key: key}
	switch st {
	case strategyImmediately:
		q.toActive(e)
	case strategyAfterBackoff:
		q.toBackoffOrActive(e)
	default:
		q.toUnschedulable(e)
	}
	return nil
}

// Requeue takes back a popped pod to be retried at once, without backoff:
// its placement was sound but lost a race (an assume conflict). It keeps its
// Timestamp, so it returns to the front among equals.
func (q *PriorityQueue) Requeue(qpi *framework.QueuedPodInfo) {
	key := qpi.Pod.Key()
	q.lock()
	defer q.mu.Unlock()
	if f := q.inFlight.get(key); f != nil {
		q.inFlight.end(key)
		if f.deleted {
			return
		}
		if f.latest != nil {
			setPod(qpi, f.latest, f.specChanged)
		}
	}
	if _, ok := q.entries[key]; ok {
		return
	}
	q.toActive(&entry{qpi: qpi, key: key})
}
