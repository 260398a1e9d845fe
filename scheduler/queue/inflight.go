package queue

import "github.com/berth-io/berth/scheduler/framework"

// inFlightTracker remembers, for pods popped and not yet handed back, the
// cluster events that arrived during their attempt, as kube-scheduler's
// in-flight events do. (The older moveRequestCycle approach would send a
// failed pod to backoffQ after any event at all; with a bind event per
// scheduled pod that is nearly always, so unschedulable pods would churn.)
//
// Events get consecutive sequence numbers; a pod remembers the last number
// issued when it was popped and sees every later event. Pods are kept in a
// list in pop order, so the events older than the oldest pod in flight can
// be dropped in O(1) amortized when it ends; with nothing in flight no
// event is kept at all.
type inFlightTracker struct {
	pods           map[string]*inFlightPod
	podsPeak       int // see framework.DeleteShrinking
	oldest, newest *inFlightPod
	// events[head:] are the events some pod in flight may still see,
	// consecutive seqs ascending. The slots before head held dropped
	// events; record reuses them rather than let append move the window
	// into a new array each time it reaches the end of the old one (with
	// a binding in flight at all times, the window never empties).
	events  []recordedEvent
	head    int
	lastSeq uint64
}

type recordedEvent struct {
	seq            uint64
	event          framework.ClusterEvent
	oldObj, newObj any
}

type inFlightPod struct {
	key        string
	startSeq   uint64
	prev, next *inFlightPod
	// popped is the version being scheduled; latest the newest version seen
	// during the attempt, if any.
	popped, latest *framework.Pod
	specChanged    bool
	activated      bool
	promoted       bool
	deleted        bool
}

func newInFlightTracker() inFlightTracker {
	return inFlightTracker{pods: map[string]*inFlightPod{}}
}

func (t *inFlightTracker) start(key string, p *framework.Pod) {
	if _, ok := t.pods[key]; ok {
		return
	}
	f := &inFlightPod{key: key, startSeq: t.lastSeq, prev: t.newest, popped: p}
	if t.newest != nil {
		t.newest.next = f
	} else {
		t.oldest = f
	}
	t.newest = f
	t.pods[key] = f
}

func (t *inFlightTracker) get(key string) *inFlightPod { return t.pods[key] }

// end forgets a pod's attempt and drops the events no pod still in flight
// can see.
func (t *inFlightTracker) end(key string) {
	f, ok := t.pods[key]
	if !ok {
		return
	}
	t.pods = framework.DeleteShrinking(t.pods, key, &t.podsPeak)
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		t.oldest = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		t.newest = f.prev
	}
	t.trim()
}

// trim drops the events every pod in flight has already seen.
func (t *inFlightTracker) trim() {
	if t.oldest == nil {
		clear(t.events[t.head:])
		t.events, t.head = t.events[:0], 0
		return
	}
	keepAfter := t.oldest.startSeq
	n := t.head
	for n < len(t.events) && t.events[n].seq <= keepAfter {
		n++
	}
	clear(t.events[t.head:n])
	t.head = n
	if t.head == len(t.events) {
		t.events, t.head = t.events[:0], 0
	}
}

// eventsSince returns the events that arrived during f's attempt.
func (t *inFlightTracker) eventsSince(f *inFlightPod) []recordedEvent {
	live := t.events[t.head:]
	if len(live) == 0 {
		return nil
	}
	i := int(f.startSeq + 1 - live[0].seq)
	if i < 0 {
		i = 0
	}
	if i >= len(live) {
		return nil
	}
	return live[i:]
}

// record remembers an event for the pods in flight, if any.
func (t *inFlightTracker) record(event framework.ClusterEvent, oldObj, newObj any) {
	if t.oldest == nil {
		return
	}
	if len(t.events) == cap(t.events) && t.head >= len(t.events)/2 {
		// At least half the array is dropped events: slide the window to
		// its start, which costs no more than the appends that filled it.
		n := copy(t.events, t.events[t.head:])
		clear(t.events[n:])
		t.events, t.head = t.events[:n], 0
	}
	t.lastSeq++
	t.events = append(t.events, recordedEvent{seq: t.lastSeq, event: event, oldObj: oldObj, newObj: newObj})
}

// update notes a new version of an in-flight pod and reports whether the
// pod is in flight.
func (t *inFlightTracker) update(key string, p *framework.Pod) bool {
	f, ok := t.pods[key]
	if !ok {
		return false
	}
	base := f.popped
	if f.latest != nil {
		base = f.latest
	}
	if !sameSpec(base, p) {
		f.specChanged = true
	}
	f.latest = p
	return true
}

func (t *inFlightTracker) markDeleted(key string) {
	if f, ok := t.pods[key]; ok {
		f.deleted = true
	}
}

func (t *inFlightTracker) markPromoted(key string) bool {
	f, ok := t.pods[key]
	if ok {
		f.activated, f.promoted = true, true
	}
	return ok
}

func (t *inFlightTracker) markActivated(key string) bool {
	f, ok := t.pods[key]
	if ok {
		f.activated = true
	}
	return ok
}
