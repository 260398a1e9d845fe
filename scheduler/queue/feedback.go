package queue

import "github.com/berth-io/berth/scheduler/framework"

// AddWithBackoff queues a pod that failed outside any scheduling attempt of
// this queue, as if it had failed its attempts-th attempt (at least 1): it
// waits out that backoff in backoffQ before it is tried again. Used for a
// pod the orchestrator could not start on its node, so that a failing node
// or image does not send the pod straight back into a cycle.
//
// A pod already queued or being scheduled is updated as Add would.
func (q *PriorityQueue) AddWithBackoff(p *framework.Pod, attempts int) {
	q.lock()
	defer q.mu.Unlock()
	if _, queued := q.entries[p.Key()]; queued || q.inFlight.get(p.Key()) != nil {
		q.updateLocked(p)
		return
	}
	now := q.opts.clock.Now()
	qpi := &framework.QueuedPodInfo{
		PodInfo:   framework.NewPodInfo(p),
		Timestamp: now,
		Arrival:   now,
		Attempts:  max(attempts, 1),
	}
	q.toBackoffOrActive(&entry{qpi: qpi})
}
