package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

const (
	faultNamespace = "faults"
	// Every pod asks for the same cpu, so the nodes' cpu is a count of
	// slots: no fragmentation, and a double-booked slot shows as overcommit.
	podCPU       = 100
	nodeCPU      = 4000
	slotsPerNode = nodeCPU / podCPU
	gangSize     = 4
	gangMin      = 3
	submitBatch  = 10
)

// podRec is what the driver knows of one pod it submitted.
type podRec struct {
	name, uid string
	group     string
	acked     bool // SubmitPods returned OK for it
	deleted   bool // DeletePod returned OK
	// deleteUnsure: a delete whose outcome is unknown (an error, or
	// NotFound after a retry that may follow a lost success).
	deleteUnsure bool
}

// loadDriver submits and deletes pods through random replicas, keeping
// about liveTarget pods alive, and remembers every acknowledgement.
type loadDriver struct {
	t          *testing.T
	reps       []*replica
	liveTarget int

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every acknowledgement
	pods    map[string]*podRec
	fifo    []string         // deletable live pods, oldest first
	groups  map[string]int32 // "namespace/group" -> min_member
	// gangSkip says why gangs are not exercised ("" while they are).
	gangSkip string

	seq          atomic.Int64
	submitted    atomic.Int64 // pods sent at least once
	acked        atomic.Int64
	rejected     atomic.Int64 // pods refused with a non-retryable code
	submitRetry  atomic.Int64 // calls retried on another replica
	deletedOK    atomic.Int64
	deleteUnsure atomic.Int64
}

func newLoadDriver(t *testing.T, reps []*replica, liveTarget int) *loadDriver {
	return &loadDriver{
		t: t, reps: reps, liveTarget: liveTarget,
		changed: make(chan struct{}),
		pods:    map[string]*podRec{},
		groups:  map[string]int32{},
	}
}

func (d *loadDriver) pick() *replica { return d.reps[rand.IntN(len(d.reps))] }

// registerNodes upserts n nodes and returns the revision of the last write.
func (d *loadDriver) registerNodes(ctx context.Context, n int) int64 {
	var last int64
	for i := range n {
		node := &berthv1.Node{Name: fmt.Sprintf("fn-%03d", i), Allocatable: map[string]int64{
			"cpu": nodeCPU, "memory": 64 << 30, "pods": 110,
		}}
		err := d.retry(ctx, "upsert node", func(ctx context.Context, r *replica) error {
			_, rev, err := r.client.UpsertNode(ctx, node)
			last = max(last, rev)
			return err
		})
		if err != nil {
			d.t.Fatal(err)
		}
	}
	return last
}

// retry runs call against random replicas until it succeeds, fails with a
// non-retryable code, or ctx ends.
func (d *loadDriver) retry(ctx context.Context, what string, call func(context.Context, *replica) error) error {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := call(cctx, d.pick())
		cancel()
		if err == nil || !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		}
		d.submitRetry.Add(1)
		if err := backoffWait(ctx, attempt); err != nil {
			return err
		}
	}
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Canceled:
		return true
	}
	return false
}

// backoffWait paces retries against a cluster that is partly down: it is
// not a wait for a condition, which the caller checks on every attempt.
func backoffWait(ctx context.Context, attempt int) error {
	d := min(time.Duration(attempt)*20*time.Millisecond, 500*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *loadDriver) newPod(name, group string) *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: faultNamespace, Name: name, PodGroup: group,
		Containers: []*berthv1.Container{{Name: "main", Image: "app:1", Requests: map[string]int64{"cpu": podCPU, "memory": 64 << 20}}},
	}
}

// submit sends pods until each is acknowledged or refused, or ctx ends.
// deletable pods join the deletion queue once acknowledged.
func (d *loadDriver) submit(ctx context.Context, pods []*berthv1.Pod, deletable bool) {
	d.mu.Lock()
	for _, p := range pods {
		d.pods[p.GetName()] = &podRec{name: p.GetName(), group: p.GetPodGroup()}
	}
	d.mu.Unlock()
	d.submitted.Add(int64(len(pods)))
	pending := pods
	for attempt := 1; len(pending) > 0; attempt++ {
		if ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := d.pick().client.SubmitPods(cctx, pending)
		cancel()
		var again []*berthv1.Pod
		switch {
		case err != nil && retryable(err):
			again = pending
		case err != nil:
			d.t.Errorf("submit %d pods: %v", len(pending), err)
			return
		default:
			for i, r := range res {
				switch code := codes.Code(r.GetCode()); {
				case code == codes.OK:
					d.ack(pending[i].GetName(), r.GetPod().GetUid(), deletable)
				case retryable(status.Error(code, "")):
					again = append(again, pending[i])
				default:
					d.rejected.Add(1)
					d.t.Logf("pod %s refused: %s: %s", pending[i].GetName(), code, r.GetMessage())
				}
			}
		}
		if pending = again; len(pending) > 0 {
			d.submitRetry.Add(1)
			if backoffWait(ctx, attempt) != nil {
				return
			}
		}
	}
}

func (d *loadDriver) ack(name, uid string, deletable bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.pods[name]
	r.acked, r.uid = true, uid
	if deletable {
		d.fifo = append(d.fifo, name)
	}
	d.acked.Add(1)
	close(d.changed)
	d.changed = make(chan struct{})
}

// waitAcked blocks until n pods in all were acknowledged, or ctx ends.
func (d *loadDriver) waitAcked(ctx context.Context, n int64) error {
	for {
		d.mu.Lock()
		ch := d.changed
		d.mu.Unlock()
		if d.acked.Load() >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// popDeletable returns the oldest live deletable pod when more than
// liveTarget are alive.
func (d *loadDriver) popDeletable() (name, uid string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.fifo) <= d.liveTarget {
		return "", "", false
	}
	name, d.fifo = d.fifo[0], d.fifo[1:]
	return name, d.pods[name].uid, true
}

// deleteOne deletes a pod by uid. Retries are the driver's own (the
// client's are disabled), so a NotFound on the first attempt means the pod
// was gone before anyone deleted it: it stays counted as alive, and the
// history check reports it lost.
func (d *loadDriver) deleteOne(ctx context.Context, name, uid string) {
	req := &berthv1.DeletePodRequest{Namespace: faultNamespace, Name: name, Uid: uid}
	var outcome error
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := d.pick().client.PodService().DeletePod(cctx, req, berth.NoRetry())
		cancel()
		outcome = err
		if err == nil || !retryable(err) || ctx.Err() != nil {
			if status.Code(err) == codes.NotFound && attempt == 1 {
				d.t.Logf("delete %s: NotFound on the first attempt", name)
				return
			}
			break
		}
		if backoffWait(ctx, attempt) != nil {
			break
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.pods[name]
	if outcome == nil {
		r.deleted = true
		d.deletedOK.Add(1)
	} else {
		r.deleteUnsure = true
		d.deleteUnsure.Add(1)
	}
}

// runRound submits pods from workers goroutines in batches, paced at
// rate pods/s, until at least minPods were sent and faultDone is closed,
// deleting the oldest as the live count passes liveTarget.
func (d *loadDriver) runRound(ctx context.Context, round, minPods int, rate float64, workers int, faultDone <-chan struct{}) {
	var sent atomic.Int64
	start := time.Now()
	more := func() bool {
		if sent.Load() < int64(minPods) {
			return true
		}
		select {
		case <-faultDone:
			return false
		default:
			return true
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && more() {
				n := sent.Add(submitBatch)
				// Pacing keeps the load steady across the fault rather
				// than spent before it.
				if err := waitUntil(ctx, start.Add(time.Duration(float64(n-submitBatch)/rate*float64(time.Second)))); err != nil {
					return
				}
				pods := make([]*berthv1.Pod, submitBatch)
				for i := range pods {
					pods[i] = d.newPod(fmt.Sprintf("p%d-%06d", round, d.seq.Add(1)), "")
				}
				d.submit(ctx, pods, true)
				for {
					name, uid, ok := d.popDeletable()
					if !ok {
						break
					}
					d.deleteOne(ctx, name, uid)
				}
			}
		}()
	}
	wg.Wait()
}

func waitUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// submitGangs creates count groups of gangSize members needing gangMin.
// If the server has no pod groups yet, gangs are skipped from then on.
func (d *loadDriver) submitGangs(ctx context.Context, round, count int) {
	for g := range count {
		d.mu.Lock()
		skip := d.gangSkip
		d.mu.Unlock()
		if skip != "" {
			return
		}
		group := fmt.Sprintf("g%d-%d", round, g)
		pg := &berthv1.PodGroup{Namespace: faultNamespace, Name: group, MinMember: gangMin, ScheduleTimeout: durationpb.New(30 * time.Second)}
		err := d.retry(ctx, "upsert pod group", func(ctx context.Context, r *replica) error {
			_, err := r.client.PodService().UpsertPodGroup(ctx, &berthv1.UpsertPodGroupRequest{PodGroup: pg})
			return err
		})
		if isUnimplemented(err) {
			d.mu.Lock()
			d.gangSkip = "UpsertPodGroup is not implemented"
			d.mu.Unlock()
			return
		}
		if err != nil {
			d.t.Errorf("upsert pod group %s: %v", group, err)
			return
		}
		d.mu.Lock()
		d.groups[faultNamespace+"/"+group] = gangMin
		d.mu.Unlock()
		members := make([]*berthv1.Pod, gangSize)
		for m := range members {
			members[m] = d.newPod(fmt.Sprintf("%s-m%d", group, m), group)
		}
		d.submit(ctx, members, false)
	}
}

func isUnimplemented(err error) bool { return status.Code(err) == codes.Unimplemented }

// alive lists the pods that were acknowledged and not deleted (nor maybe
// deleted): each must exist at the end.
func (d *loadDriver) alive() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for _, r := range d.pods {
		if r.acked && !r.deleted && !r.deleteUnsure {
			out[faultNamespace+"/"+r.name] = r.uid
		}
	}
	return out
}

func (d *loadDriver) groupMins() map[string]int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int32, len(d.groups))
	for k, v := range d.groups {
		out[k] = v
	}
	return out
}

// bindingWatcher follows WatchBindings through the faults over a
// connection that knows every replica, so a reconnect lands on any live
// one, and resumes from the last revision it saw.
type bindingWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	changed  chan struct{}
	events   []*berthv1.BindingEvent
	restarts int   // times the client's watch returned and was restarted
	lastErr  error // why it last returned
}

func startBindingWatcher(t *testing.T, reps []*replica, from int64) *bindingWatcher {
	t.Helper()
	var addrs []resolver.Address
	for _, r := range reps {
		addrs = append(addrs, resolver.Address{Addr: r.addr})
	}
	res := manual.NewBuilderWithScheme("berthfaults")
	res.InitialState(resolver.State{Addresses: addrs})
	c, err := berth.Dial(context.Background(), "berthfaults:///replicas",
		berth.WithBackoff(20*time.Millisecond, 500*time.Millisecond),
		berth.WithDialOptions(grpc.WithResolvers(res)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &bindingWatcher{cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	go w.run(ctx, c, from)
	t.Cleanup(func() {
		w.stop()
		c.Close()
	})
	return w
}

func (w *bindingWatcher) run(ctx context.Context, c *berth.Client, from int64) {
	defer close(w.done)
	// last and atLast let a restart of the client's watch (which keeps its
	// own cursor only while it runs) resume without gap or repeat. Only the
	// replay right after such a restart is filtered: everything else is
	// recorded as received, for the checker to judge.
	last := from
	atLast := map[string]bool{}
	replaying := false
	fn := func(ev *berthv1.BindingEvent) error {
		key := ev.GetType().String() + " " + ev.GetNamespace() + "/" + ev.GetName() + " " + ev.GetUid()
		if replaying {
			if ev.GetRevision() < last || (ev.GetRevision() == last && atLast[key]) {
				return nil
			}
			replaying = ev.GetRevision() == last
		}
		if ev.GetRevision() != last {
			last = ev.GetRevision()
			clear(atLast)
		}
		atLast[key] = true
		w.mu.Lock()
		w.events = append(w.events, ev)
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		return nil
	}
	for attempt := 1; ctx.Err() == nil; attempt++ {
		resume := last
		if len(atLast) > 0 && last > 1 {
			resume = last - 1 // the stream may have split revision last
		}
		err := c.WatchBindings(ctx, resume, fn)
		replaying = true
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.restarts++
		w.lastErr = err
		w.mu.Unlock()
		if backoffWait(ctx, attempt) != nil {
			return
		}
	}
}

func (w *bindingWatcher) stop() {
	w.cancel()
	<-w.done
}

func (w *bindingWatcher) snapshot() ([]*berthv1.BindingEvent, int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*berthv1.BindingEvent(nil), w.events...), w.restarts, w.lastErr
}

// waitFor blocks until cond holds on the events seen, or ctx ends.
func (w *bindingWatcher) waitFor(ctx context.Context, cond func([]*berthv1.BindingEvent) bool) error {
	for {
		w.mu.Lock()
		ch := w.changed
		ok := cond(w.events)
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.New("watcher did not catch up")
		}
	}
}
