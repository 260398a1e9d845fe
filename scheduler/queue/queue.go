// Package queue is one shard's scheduling queue, after kube-scheduler's
// PriorityQueue: pending pods wait in one of three pools.
//
//   - activeQ: pods ready to be tried, a heap ordered by the QueueSort less
//     function; Pop takes the head.
//   - backoffQ: pods that failed and wait out a per-pod exponential backoff
//     (1s doubling to 10s by default), ordered by when it ends.
//   - unschedulable: pods whose last attempt failed and which wait for a
//     cluster event that may help them (or for the flush interval), plus pods
//     held back by PreEnqueue (gated).
//
// A popped pod belongs to no pool until its attempt ends: the caller then
// calls AddUnschedulableIfNotPresent (failed), Requeue (retry at once) or
// Done (succeeded). Events that arrive meanwhile are remembered, as
// kube-scheduler's "in-flight events", so that a pod failing because of
// state an event has already changed is retried instead of parked.
package queue

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/internal/handoff"
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("queue: closed")

// DefaultLess is kube-scheduler's PrioritySort: higher priority first, then
// the pod queued earlier.
func DefaultLess(a, b *framework.QueuedPodInfo) bool {
	return priorityOrder(a.Pod.Priority, b.Pod.Priority, a.Timestamp, b.Timestamp) < 0
}

// priorityOrder is DefaultLess as a comparison of the keys it reads:
// negative when a goes first, positive when b does, 0 when neither.
func priorityOrder(pa, pb int32, ta, tb time.Time) int {
	switch {
	case pa != pb:
		return cmp.Compare(pb, pa)
	case ta.Before(tb):
		return -1
	case tb.Before(ta):
		return 1
	}
	return 0
}

type pool uint8

const (
	poolActive pool = iota + 1
	poolBackoff
	poolUnschedulable
)

// entry is a pod in one of the pools.
type entry struct {
	qpi  *framework.QueuedPodInfo
	pool pool
	// index is the position in the pool's heap (active and backoff).
	index int
	// seq breaks ties in the heaps: equal pods leave in arrival order.
	seq uint64
	// backoffExpiry is when the pod may leave backoffQ.
	backoffExpiry time.Time
	// key is the pod's key once podKey made it: the same string as the
	// entries map's key, so a pod's key is built once while it is queued.
	key string
	// priority and timestamp are the pod's, kept here for activeQ's
	// default order (see New).
	priority  int32
	timestamp time.Time
}

func (e *entry) podKey() string {
	if e.key == "" {
		e.key = e.qpi.Pod.Key()
	}
	return e.key
}

// PriorityQueue holds the pending pods of one shard. It is safe for
// concurrent use. Plugin callbacks (the less function, PreEnqueue, queueing
// hints) run under its lock and must not call back into it.
type PriorityQueue struct {
	opts options
	// interesting lists every registered event, to drop others early.
	interesting []framework.ClusterEvent

	mu      sync.Mutex
	entries map[string]*entry // every pod in a pool, by key
	active  entryHeap
	backoff entryHeap
	unsched map[string]*entry
	// entriesPeak and unschedPeak let the maps shrink after a backlog
	// (framework.DeleteShrinking).
	entriesPeak, unschedPeak int
	seq                      uint64
	// inFlight tracks popped pods and the events seen since; see inflight.go.
	inFlight inFlightTracker
	// leftDone holds the keys Done could not end for want of the lock; the
	// next holder ends them first (see lock).
	leftDone handoff.Keys
	// wake is closed (and cleared) when a pod enters activeQ or the queue
	// closes; blocked Pops wait on it.
	wake    chan struct{}
	closed  bool
	stop    chan struct{}
	running sync.WaitGroup
	scratch []move
}

type move struct {
	e        *entry
	strategy strategy
}

// New returns an empty queue ordering activeQ by less. Nil means
// DefaultLess, kube's PrioritySort, which the queue then applies to a copy
// of the priority and timestamp it keeps per pod: faster than any less
// given, DefaultLess included.
func New(less framework.LessFunc, opts ...Option) *PriorityQueue {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	q := &PriorityQueue{
		opts:     o,
		entries:  map[string]*entry{},
		unsched:  map[string]*entry{},
		inFlight: newInFlightTracker(),
		stop:     make(chan struct{}),
	}
	if less == nil {
		// DefaultLess on keys each entry keeps: every comparison of a
		// sift read the pod and its info through two more pointers, a
		// cache miss each in an activeQ of tens of thousands.
		q.active.rekey = func(e *entry) { e.priority, e.timestamp = e.qpi.Pod.Priority, e.qpi.Timestamp }
		q.active.less = func(a, b *entry) bool {
			if c := priorityOrder(a.priority, b.priority, a.timestamp, b.timestamp); c != 0 {
				return c < 0
			}
			return a.seq < b.seq
		}
	} else {
		q.active.less = func(a, b *entry) bool {
			if less(a.qpi, b.qpi) {
				return true
			}
			return !less(b.qpi, a.qpi) && a.seq < b.seq
		}
	}
	q.backoff.less = func(a, b *entry) bool {
		if !a.backoffExpiry.Equal(b.backoffExpiry) {
			return a.backoffExpiry.Before(b.backoffExpiry)
		}
		return a.seq < b.seq
	}
	seen := map[framework.ClusterEvent]bool{}
	for _, regs := range o.hints {
		for _, r := range regs {
			if !seen[r.Event] {
				seen[r.Event] = true
				q.interesting = append(q.interesting, r.Event)
			}
		}
	}
	return q
}

// Run starts the background flushers: every second, pods whose backoff
// ended move to activeQ; every 30s (or the flush interval if shorter), pods
// unschedulable for longer than the flush interval are retried. They stop
// when ctx is done or the queue is closed. Call Run at most once.
func (q *PriorityQueue) Run(ctx context.Context) {
	period := min(unschedulableFlushPeriod, q.opts.unschedulableFlushInterval)
	q.running.Add(1)
	go func() {
		defer q.running.Done()
		lastUnschedFlush := q.opts.clock.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-q.stop:
				return
			case now := <-q.opts.clock.After(backoffFlushPeriod):
				q.flushBackoffCompleted()
				if now.Sub(lastUnschedFlush) >= period {
					q.flushUnschedulableLeftover()
					lastUnschedFlush = now
				}
			}
		}
	}()
}

// Close wakes every blocked Pop with ErrClosed and stops Run's flushers,
// waiting for them to exit.
func (q *PriorityQueue) Close() {
	q.lock()
	if !q.closed {
		q.closed = true
		close(q.stop)
		q.signal()
	}
	q.mu.Unlock()
	q.running.Wait()
}

// signal wakes blocked Pops. Callers hold mu.
func (q *PriorityQueue) signal() {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

// Add queues a new pending pod. A pod already queued is updated instead; a
// pod being scheduled is only noted, for when its attempt ends.
func (q *PriorityQueue) Add(p *framework.Pod) {
	q.lock()
	defer q.mu.Unlock()
	q.updateLocked(p)
}

// Update records a new version of a pending pod. A status-only change (same
// spec) replaces the stored pod in place, keeping its position and backoff.
// A spec change re-sorts activeQ, and moves a pod out of the unschedulable
// pool (to backoffQ while it backs off, else through PreEnqueue to
// activeQ), since the change may be what it waited for. A pod not queued is
// added. old is accepted for symmetry with watch events; the stored
// version, not old, is compared with newPod.
func (q *PriorityQueue) Update(old, newPod *framework.Pod) {
	_ = old
	q.lock()
	defer q.mu.Unlock()
	q.updateLocked(newPod)
}

func (q *PriorityQueue) updateLocked(p *framework.Pod) {
	key := p.Key()
	if q.inFlight.update(key, p) {
		return
	}
	e, ok := q.entries[key]
	if !ok {
		now := q.opts.clock.Now()
		qpi := &framework.QueuedPodInfo{PodInfo: framework.NewPodInfo(p), Timestamp: now, Arrival: now}
		q.toActive(&entry{qpi: qpi, key: key})
		return
	}
	specChanged := !sameSpec(e.qpi.Pod, p)
	setPod(e.qpi, p, specChanged)
	if !specChanged {
		return
	}
	switch e.pool {
	case poolActive:
		q.active.changed(e.index)
	case poolUnschedulable:
		q.removeLocked(e)
		q.toBackoffOrActive(e)
	}
}

// setPod points qpi at a new version of its pod, recomputing requests only
// when the spec changed.
func setPod(qpi *framework.QueuedPodInfo, p *framework.Pod, specChanged bool) {
	if specChanged {
		qpi.PodInfo = framework.NewPodInfo(p)
		return
	}
	qpi.PodInfo = qpi.PodInfo.WithPod(p)
}

// sameSpec reports whether two versions of a pod differ only in status:
// phase, node, nominated node, start time, status message, revision and the
// store's record. (TestPodFieldsClassified makes a new Pod field pick a side.)
func sameSpec(a, b *framework.Pod) bool {
	if a == b {
		return true
	}
	ca, cb := *a, *b
	clearStatus(&ca)
	clearStatus(&cb)
	return reflect.DeepEqual(ca, cb)
}

func clearStatus(p *framework.Pod) {
	p.NodeName, p.Phase, p.StartTime, p.Revision, p.Source = "", 0, time.Time{}, 0, ""
	if p.Extras == nil {
		return
	}
	ex := p.EditExtras()
	ex.NominatedNodeName, ex.StatusMessage, ex.PreemptedBy, ex.Rejections = "", "", "", nil
	ex.ViewRevision, ex.Shard, ex.ShardEpoch = 0, 0, 0
	if ex.IsZero() {
		p.Extras = nil
	}
}

// Delete drops a pod from whichever pool holds it. A pod being scheduled is
// marked so its attempt's end does not queue it again.
func (q *PriorityQueue) Delete(p *framework.Pod) {
	key := p.Key()
	q.lock()
	defer q.mu.Unlock()
	q.inFlight.markDeleted(key)
	if e, ok := q.entries[key]; ok {
		q.removeLocked(e)
	}
}

// removeLocked takes an entry out of its pool.
func (q *PriorityQueue) removeLocked(e *entry) {
	switch e.pool {
	case poolActive:
		q.active.remove(e.index)
	case poolBackoff:
		q.backoff.remove(e.index)
	case poolUnschedulable:
		q.unsched = framework.DeleteShrinking(q.unsched, e.podKey(), &q.unschedPeak)
	}
	q.entries = framework.DeleteShrinking(q.entries, e.podKey(), &q.entriesPeak)
	e.pool = 0
}

// toActive puts a pod that is in no pool into activeQ if PreEnqueue lets it,
// else parks it as gated.
func (q *PriorityQueue) toActive(e *entry) {
	if !q.passesGate(e.qpi) {
		q.toUnschedulable(e)
		return
	}
	q.seq++
	e.seq, e.pool = q.seq, poolActive
	q.entries[e.podKey()] = e
	q.active.push(e)
	q.signal()
}

// toBackoffOrActive puts a pod that is in no pool into backoffQ while its
// backoff lasts, else into activeQ.
func (q *PriorityQueue) toBackoffOrActive(e *entry) {
	expiry, backingOff := q.backoffExpiry(e.qpi)
	if !backingOff {
		q.toActive(e)
		return
	}
	q.seq++
	e.seq, e.pool, e.backoffExpiry = q.seq, poolBackoff, expiry
	q.entries[e.podKey()] = e
	q.backoff.push(e)
}

func (q *PriorityQueue) toUnschedulable(e *entry) {
	e.pool = poolUnschedulable
	key := e.podKey()
	q.entries[key] = e
	q.unsched[key] = e
}

// passesGate runs PreEnqueue and records its verdict on the pod.
func (q *PriorityQueue) passesGate(qpi *framework.QueuedPodInfo) bool {
	if q.opts.preEnqueue == nil {
		return true
	}
	st := q.opts.preEnqueue(qpi.Pod)
	if st.IsSuccess() {
		if qpi.GatingPlugin != "" {
			qpi.GatingPlugin, qpi.UnschedulablePlugins = "", nil
		}
		return true
	}
	plugin := st.Plugin()
	if plugin == "" {
		plugin = "PreEnqueue"
	}
	// The gating plugin is the pod's rejector, so the events it registered
	// (and Update) get the pod re-checked.
	qpi.GatingPlugin = plugin
	qpi.UnschedulablePlugins = map[string]struct{}{plugin: {}}
	return false
}

// BackoffDuration is how long a pod backs off after its attempts-th failed
// attempt: the initial backoff doubled per further attempt, capped.
func (q *PriorityQueue) BackoffDuration(attempts int) time.Duration {
	d := q.opts.podInitialBackoff
	for i := 1; i < attempts; i++ {
		if d > q.opts.podMaxBackoff-d {
			return q.opts.podMaxBackoff
		}
		d += d
	}
	return min(d, q.opts.podMaxBackoff)
}

// backoffExpiry says when the pod's backoff ends, counted from its last
// failure (Timestamp), and whether it is still running. A pod never tried
// does not back off.
func (q *PriorityQueue) backoffExpiry(qpi *framework.QueuedPodInfo) (time.Time, bool) {
	if qpi.Attempts == 0 {
		return time.Time{}, false
	}
	expiry := qpi.Timestamp.Add(q.BackoffDuration(qpi.Attempts))
	return expiry, expiry.After(q.opts.clock.Now())
}

// Pop removes and returns the head of activeQ, blocking while it is empty.
// It returns ctx's error when ctx is done first, ErrClosed once the queue is
// closed. The pod is in flight until its attempt ends (see package doc).
func (q *PriorityQueue) Pop(ctx context.Context) (*framework.QueuedPodInfo, error) {
	q.lock()
	for q.active.len() == 0 {
		if q.closed {
			q.mu.Unlock()
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			q.mu.Unlock()
			return nil, err
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		q.lock()
	}
	defer q.mu.Unlock()
	e := q.active.pop()
	qpi := e.qpi
	key := e.podKey()
	q.entries = framework.DeleteShrinking(q.entries, key, &q.entriesPeak)
	qpi.Attempts++
	if qpi.InitialAttemptTimestamp == nil {
		now := q.opts.clock.Now()
		qpi.InitialAttemptTimestamp = &now
	}
	q.inFlight.start(key, qpi.Pod)
	return qpi, nil
}

// Len returns the sizes of activeQ, backoffQ and the unschedulable pool
// (gated pods included).
func (q *PriorityQueue) Len() (active, backoff, unschedulable int) {
	q.lock()
	defer q.mu.Unlock()
	return q.active.len(), q.backoff.len(), len(q.unsched)
}

// PendingPods returns every queued pod (not those being scheduled).
func (q *PriorityQueue) PendingPods() []*framework.Pod {
	q.lock()
	defer q.mu.Unlock()
	out := make([]*framework.Pod, 0, len(q.entries))
	for _, e := range q.entries {
		out = append(out, e.qpi.Pod)
	}
	return out
}
