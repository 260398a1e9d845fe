package queue

import (
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// This file moves parked pods back towards activeQ: on cluster events,
// when asked to (Activate, Promote), and on the periodic flushes.

// MoveAllToActiveOrBackoffQueue retries the unschedulable pods the event
// may help: those with a rejecting plugin that registered an event matching
// it whose queueing hint says Queue (a nil hint means Queue; a hint error
// counts as Queue so no pod is stranded), and those with no rejecting plugin
// at all. A wildcard event moves every pod. preCheck, if set, must also
// accept the pod. Moved pods go to backoffQ while backing off, else to
// activeQ (through PreEnqueue); a Queue from a Pending plugin skips backoff.
// The event is also remembered for pods being scheduled.
func (q *PriorityQueue) MoveAllToActiveOrBackoffQueue(event framework.ClusterEvent, oldObj, newObj any, preCheck func(*framework.Pod) bool) {
	q.lock()
	defer q.mu.Unlock()
	if !q.isInteresting(event) {
		return
	}
	q.inFlight.record(event, oldObj, newObj)
	moves := q.scratch[:0]
	for _, e := range q.unsched {
		if preCheck != nil && !preCheck(e.qpi.Pod) {
			continue
		}
		if s := q.worth(e.qpi, event, oldObj, newObj); s != strategySkip {
			moves = append(moves, move{e, s})
		}
	}
	q.applyMoves(moves)
}

// applyMoves takes the listed unschedulable pods out and requeues them.
func (q *PriorityQueue) applyMoves(moves []move) {
	for _, m := range moves {
		q.removeLocked(m.e)
		if m.strategy == strategyImmediately {
			q.toActive(m.e)
		} else {
			q.toBackoffOrActive(m.e)
		}
	}
	clear(moves)
	q.scratch = moves[:0]
}

// Activate moves the named pods to activeQ at once, skipping backoff (still
// through PreEnqueue). A pod being scheduled is marked so that, should its
// attempt fail, it is retried rather than parked.
func (q *PriorityQueue) Activate(keys ...string) {
	q.lock()
	defer q.mu.Unlock()
	for _, key := range keys {
		if q.inFlight.markActivated(key) {
			continue
		}
		e, ok := q.entries[key]
		if !ok || e.pool == poolActive {
			continue
		}
		q.removeLocked(e)
		q.toActive(e)
	}
}

// Promote moves a pod, skipping any backoff, to activeQ at the place it
// first arrived at among pods of its priority; a pod being scheduled goes
// there when its attempt fails. It is for a preemptor whose victims are
// all gone: it has room held for it, and every pod that arrived after it
// and goes first keeps that room idle while its nomination is charged in
// every filter. Kubernetes puts it behind them.
func (q *PriorityQueue) Promote(key string) {
	q.lock()
	defer q.mu.Unlock()
	if q.inFlight.markPromoted(key) {
		return
	}
	e, ok := q.entries[key]
	if !ok {
		return
	}
	q.removeLocked(e)
	e.qpi.Timestamp = arrival(e.qpi)
	q.toActive(e)
}

// arrival is when the pod first entered the queue; pods queued before
// Arrival was recorded count from their Timestamp.
func arrival(qpi *framework.QueuedPodInfo) time.Time {
	if qpi.Arrival.IsZero() || qpi.Arrival.After(qpi.Timestamp) {
		return qpi.Timestamp
	}
	return qpi.Arrival
}

// flushBackoffCompleted moves pods whose backoff ended to activeQ.
func (q *PriorityQueue) flushBackoffCompleted() {
	q.lock()
	defer q.mu.Unlock()
	now := q.opts.clock.Now()
	for {
		e := q.backoff.peek()
		if e == nil || e.backoffExpiry.After(now) {
			return
		}
		q.removeLocked(e)
		q.toActive(e)
	}
}

// flushUnschedulableLeftover retries pods unschedulable for longer than the
// flush interval; gated pods are re-checked by PreEnqueue.
func (q *PriorityQueue) flushUnschedulableLeftover() {
	q.lock()
	defer q.mu.Unlock()
	now := q.opts.clock.Now()
	moves := q.scratch[:0]
	for _, e := range q.unsched {
		if now.Sub(e.qpi.Timestamp) > q.opts.unschedulableFlushInterval {
			moves = append(moves, move{e, strategyAfterBackoff})
		}
	}
	q.applyMoves(moves)
}
