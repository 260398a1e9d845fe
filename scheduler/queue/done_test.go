package queue

import "testing"

// TestDoneLeavesItsKeyWhenTheLockIsBusy: Done does not wait for a busy
// lock; the next holder ends the attempt before it looks at anything.
func TestDoneLeavesItsKeyWhenTheLockIsBusy(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add(newPod("p", 0))
	qpi := pop(t, q)
	key := qpi.Pod.Key()

	q.mu.Lock()
	q.Done(key) // would deadlock if it waited for the lock
	_, stillInFlight := q.inFlight.pods[key]
	q.mu.Unlock()
	if !stillInFlight {
		t.Fatal("Done changed the in-flight state without the lock")
	}

	q.lock()
	_, stillInFlight = q.inFlight.pods[key]
	q.mu.Unlock()
	if stillInFlight {
		t.Error("the next holder of the lock did not end the attempt Done left")
	}

	// The pod can be queued and tracked again.
	q.Add(newPod("p", 0))
	again := pop(t, q)
	q.mu.Lock()
	_, tracked := q.inFlight.pods[again.Pod.Key()]
	q.mu.Unlock()
	if !tracked {
		t.Error("a new attempt of the pod is not in flight")
	}
}
