package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// errStalled ends a wait that saw no pod bind, no eviction and no
// deletion for the stall period: something the workload needs (a plugin,
// preemption) is missing, and waiting out the whole timeout would not help.
var errStalled = errors.New("bench: no progress")

// podRecord is what the bench knows of one pod it submits.
type podRecord struct {
	// pod is what is submitted; a slim tracker drops it once acknowledged,
	// keeping only namespace and name.
	pod             *berthv1.Pod
	namespace, name string
	phase           podPhase
	uid             string
	submitted       int64 // unix nanos when its SubmitPods call started; 0 before
	acked           bool  // the SubmitPods call returned
	ackedAt         int64 // unix nanos the call's answer arrived; 0 before
	boundAt         int64 // unix nanos the BOUND event arrived; 0 while not bound
	node            string
	deleted         bool // an UNBOUND event was seen
	// due is when the pacer meant to send it (unix nanos; 0 without
	// --rate): its latency runs from here, so time spent held back by the
	// bench counts, as it would for a client at that traffic.
	due int64
}

// latency is how long the pod took to bind: from its due time under
// --rate, else from its call start.
func (r *podRecord) latency() time.Duration {
	if r.due != 0 {
		return time.Duration(r.boundAt - r.due)
	}
	return r.callLatency()
}

// callLatency is how long the pod took to bind from the start of its
// SubmitPods call: the server's share, without the bench's backlog.
func (r *podRecord) callLatency() time.Duration {
	return time.Duration(r.boundAt - r.submitted)
}

// ackSplit divides callLatency at the durable acknowledgement: the call
// (the create's Txn and both gRPC hops), then the rest (the watch to the
// scheduler, the cycle, the binding's Txn, the watch to the subscriber).
// The BOUND event can beat the answer to the call, which then counts as 0.
func (r *podRecord) ackSplit() (call, rest time.Duration) {
	if r.ackedAt == 0 {
		return 0, 0
	}
	return time.Duration(r.ackedAt - r.submitted), time.Duration(max(r.boundAt-r.ackedAt, 0))
}

// evictRequest names a preemption victim to delete.
type evictRequest struct {
	namespace, name, uid string
}

// bindingStream is the receiving half of WatchBindings.
type bindingStream interface {
	Recv() (*berthv1.WatchBindingsResponse, error)
}

// tracker follows the pods of one run through the WatchBindings stream.
// One goroutine feeds it events (watch); the submitters, the evictor and
// the waiters read it.
type tracker struct {
	mu      sync.Mutex
	byName  map[string]int32
	pods    []podRecord
	sent    [numPhases]int // pods whose SubmitPods call started
	bound   [numPhases]int
	evicts  int // EVICT events for pods of the run
	deletes int // victims and replayed deletions done by the bench
	// lastProgress is when a pod last bound, was evicted or deleted (unix
	// nanos), for stall detection.
	lastProgress int64
	rev          int64 // highest revision the watch has delivered
	err          error // why the watch ended
	// waiters: channels closed at the next change of one pod.
	waiters map[int32]chan struct{}

	// kick (capacity 1) wakes the one goroutine waiting on counters.
	kick chan struct{}
	// evictions carries victims from the watch to the evictor.
	evictions chan evictRequest
	// slim drops each pod's body once it is acknowledged, so a run of a
	// million pods (berth load) does not hold them all.
	slim bool
	// retried counts pods sent again after a transient refusal.
	retried int
	// now is the clock of call starts, a fake in tests.
	now func() time.Time
}

func newTracker() *tracker {
	return &tracker{
		byName:    map[string]int32{},
		waiters:   map[int32]chan struct{}{},
		kick:      make(chan struct{}, 1),
		evictions: make(chan evictRequest, 1<<14),
		now:       time.Now,
	}
}

// add registers a pod before it is submitted, so its events are
// recognised; the returned slot names it from then on.
func (t *tracker) add(p *berthv1.Pod, phase podPhase) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	slot := int32(len(t.pods))
	t.pods = append(t.pods, podRecord{pod: p, namespace: p.GetNamespace(), name: p.GetName(), phase: phase})
	t.byName[p.GetName()] = slot
	return slot
}

// stampDue records when each pod of slots was due to be sent, dueAt(k)
// for slots[k].
func (t *tracker) stampDue(slots []int32, dueAt func(k int) time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range slots {
		t.pods[s].due = dueAt(k).UnixNano()
	}
}

// startSubmit stamps the pods of one SubmitPods call and returns them.
func (t *tracker) startSubmit(slots []int32) []*berthv1.Pod {
	now := t.now().UnixNano()
	out := make([]*berthv1.Pod, len(slots))
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range slots {
		r := &t.pods[s]
		// A retried pod keeps its first stamp: its latency includes the
		// retries.
		if r.submitted == 0 {
			r.submitted = now
			t.sent[r.phase]++
		}
		out[k] = r.pod
	}
	return out
}

// acked records the results of one SubmitPods call.
func (t *tracker) acked(slots []int32, results []*berthv1.SubmitPodResult) error {
	_, err := t.ackedOrRetry(slots, results, false)
	return err
}

// ackedOrRetry is acked that, when retry is set, leaves the pods refused
// for a passing reason (transient) unacknowledged and returns them, to be
// sent again.
func (t *tracker) ackedOrRetry(slots []int32, results []*berthv1.SubmitPodResult, retry bool) ([]int32, error) {
	if len(results) != len(slots) {
		return nil, fmt.Errorf("submit: %d results for %d pods", len(results), len(slots))
	}
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	var err error
	var again []int32
	for k, s := range slots {
		r := &t.pods[s]
		res := results[k]
		if retry && transient(codes.Code(res.GetCode())) {
			again = append(again, s)
			t.retried++
			continue
		}
		r.acked = true
		r.ackedAt = now
		r.uid = res.GetPod().GetUid()
		if res.GetCode() != 0 && err == nil {
			err = fmt.Errorf("submit pod %s/%s: %s: %s", r.namespace, r.name, codes.Code(res.GetCode()), res.GetMessage())
		}
		if t.slim {
			r.pod = nil
		}
		t.notifyLocked(s)
	}
	return again, err
}

// transient says whether a refusal may pass if the call is made again: an
// overloaded front (ResourceExhausted) or a store that did not answer in
// time (Unavailable, outcome unknown: submitting is idempotent).
func transient(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.ResourceExhausted
}

// watch feeds the stream into the tracker until it fails, which is how it
// ends when the run's context (ctx, the stream's) is cancelled.
func (t *tracker) watch(ctx context.Context, stream bindingStream) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.fail(fmt.Errorf("watch: %w", err))
			return
		}
		if resp.GetEvent() == nil {
			t.progressRevision(resp.GetProgressRevision())
			continue
		}
		victim, err := t.handle(resp.GetEvent(), time.Now().UnixNano())
		if err != nil {
			t.fail(err)
			return
		}
		if victim != nil {
			// Outside the lock: the evictor takes it to record deletions.
			select {
			case t.evictions <- *victim:
			case <-ctx.Done():
				t.fail(ctx.Err())
				return
			}
		}
		t.wake()
	}
}

// handle applies one event; it returns the victim to delete for an EVICT
// of one of the run's pods.
func (t *tracker) handle(ev *berthv1.BindingEvent, now int64) (*evictRequest, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rev = max(t.rev, ev.GetRevision())
	slot, ok := t.byName[ev.GetName()]
	if !ok || t.pods[slot].namespace != ev.GetNamespace() {
		return nil, nil // not a pod of this run
	}
	r := &t.pods[slot]
	defer t.notifyLocked(slot)
	switch ev.GetType() {
	case berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND:
		if r.boundAt != 0 {
			return nil, fmt.Errorf("pod %s/%s bound twice (revision %d)", ev.GetNamespace(), ev.GetName(), ev.GetRevision())
		}
		r.boundAt, r.node = now, ev.GetNodeName()
		t.bound[r.phase]++
		t.lastProgress = now
	case berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND:
		r.deleted = true
	case berthv1.BindingEventType_BINDING_EVENT_TYPE_EVICT:
		// The orchestrator's part of preemption: the scheduler picked this
		// pod as a victim; deleting it frees the node for the preemptor.
		t.evicts++
		t.lastProgress = now
		uid := ev.GetUid()
		if uid == "" {
			uid = r.uid
		}
		return &evictRequest{namespace: ev.GetNamespace(), name: ev.GetName(), uid: uid}, nil
	}
	return nil, nil
}

func (t *tracker) progressRevision(rev int64) {
	t.mu.Lock()
	t.rev = max(t.rev, rev)
	t.mu.Unlock()
	t.wake()
}

func (t *tracker) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	for slot := range t.waiters {
		t.notifyLocked(slot)
	}
	t.mu.Unlock()
	t.wake()
}

// deleted records a deletion the bench made: a victim or a replayed one.
func (t *tracker) deleted() {
	t.mu.Lock()
	t.deletes++
	t.lastProgress = time.Now().UnixNano()
	t.mu.Unlock()
	t.wake()
}

// touch restarts the stall clock, at the start of a phase.
func (t *tracker) touch() {
	t.mu.Lock()
	t.lastProgress = time.Now().UnixNano()
	t.mu.Unlock()
}

func (t *tracker) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *tracker) notifyLocked(slot int32) {
	if ch, ok := t.waiters[slot]; ok {
		close(ch)
		delete(t.waiters, slot)
	}
}

// slot returns a copy of one pod's record and a channel closed at its next
// change (or when the watch fails).
func (t *tracker) slot(slot int32) (podRecord, <-chan struct{}, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.waiters[slot]
	if !ok {
		ch = make(chan struct{})
		t.waiters[slot] = ch
	}
	return t.pods[slot], ch, t.err
}

// ackedCount is how many pods of phase were acknowledged OK.
func (t *tracker) ackedCount(phase podPhase) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int
	for _, r := range t.pods {
		if r.phase == phase && r.acked && r.uid != "" {
			n++
		}
	}
	return n
}

// record returns a copy of one pod's record.
func (t *tracker) record(slot int32) podRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods[slot]
}

// trackerCounts is a snapshot of the counters.
type trackerCounts struct {
	sent, bound     [numPhases]int
	evicts, deletes int
	retried         int
	rev             int64
	lastProgress    time.Time
	err             error
}

func (t *tracker) counts() trackerCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return trackerCounts{
		sent: t.sent, bound: t.bound, evicts: t.evicts, deletes: t.deletes, retried: t.retried, rev: t.rev,
		lastProgress: time.Unix(0, t.lastProgress), err: t.err,
	}
}

// waitFor blocks until done says so, the watch fails, the context ends, or
// nothing progresses for stall (0: no limit). Only one goroutine may wait
// at a time.
func (t *tracker) waitFor(ctx context.Context, stall time.Duration, done func(trackerCounts) bool) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		c := t.counts()
		if done(c) {
			return nil
		}
		if c.err != nil {
			return c.err
		}
		if stall > 0 && time.Since(c.lastProgress) > stall {
			return fmt.Errorf("%w for %s", errStalled, stall)
		}
		select {
		case <-t.kick:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// evict deletes the victims the watch announces, with workers calls in
// flight, until ctx ends. A victim already gone (NotFound) or replaced
// (FailedPrecondition: another uid) needs nothing more.
func (t *tracker) evict(ctx context.Context, pods berthv1.PodServiceClient, workers int) *evictor {
	e := &evictor{}
	for range workers {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case v := <-t.evictions:
					_, err := pods.DeletePod(ctx, &berthv1.DeletePodRequest{Namespace: v.namespace, Name: v.name, Uid: v.uid})
					switch status.Code(err) {
					case codes.OK, codes.NotFound, codes.FailedPrecondition:
						t.deleted()
					case codes.Canceled:
						// The run is over.
					default:
						e.failed(fmt.Errorf("delete victim %s/%s: %w", v.namespace, v.name, err))
					}
				}
			}
		}()
	}
	return e
}

// evictor is the running victim deleter.
type evictor struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	errs  int
	first error
}

func (e *evictor) failed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs++
	if e.first == nil {
		e.first = err
	}
}

// wait returns once every worker has stopped (after ctx ended), with the
// number of failed deletions and the first failure.
func (e *evictor) wait() (int, error) {
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.errs, e.first
}
