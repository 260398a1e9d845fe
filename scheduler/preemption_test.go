package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// evictCall is one Evict seen by slowEvictor, and whether the preemptor was
// already nominated to the node when its victims were handed over.
type evictCall struct {
	Preemptor string
	Node      string
	Nominated bool
}

// slowEvictor is a Committer whose first Evict blocks until released, as a
// slow storage write would, and which reports every status write.
type slowEvictor struct {
	s       *Scheduler
	entered chan struct{} // closed when the first Evict starts
	release chan struct{} // the first Evict returns once this is closed
	status  chan string   // keys of pods whose status was recorded

	mu    sync.Mutex
	calls []evictCall
}

var _ Committer = (*slowEvictor)(nil)

func (*slowEvictor) Bind(context.Context, *framework.Pod, string) error { return nil }

func (e *slowEvictor) RecordUnschedulable(_ context.Context, p *framework.Pod, _ Unschedulable) error {
	e.status <- p.Key()
	return nil
}

func (e *slowEvictor) Evict(_ context.Context, preemptor *framework.Pod, node string, _ []*framework.Pod) error {
	nominated := false
	for _, pi := range e.s.nominator.NominatedPodsForNode(node) {
		nominated = nominated || pi.Pod.Key() == preemptor.Key()
	}
	e.mu.Lock()
	e.calls = append(e.calls, evictCall{Preemptor: preemptor.Key(), Node: node, Nominated: nominated})
	first := len(e.calls) == 1
	e.mu.Unlock()
	if first {
		close(e.entered)
		<-e.release
	}
	return nil
}

func cpuPod(name string, priority int32, milliCPU int64, node string) *framework.Pod {
	phase := framework.PodPending
	if node != "" {
		phase = framework.PodRunning
	}
	return &framework.Pod{
		Namespace: "ns", Name: name, UID: name, Priority: priority, NodeName: node, Phase: phase,
		Containers: []framework.Container{{Name: "c", Requests: framework.ResourceList{framework.ResourceCPU: milliCPU}}},
	}
}

// TestConcurrentPreemptionsNeverShareRoom: two preemptors in different
// shards fail at once on a cluster with room for one of them after
// eviction. The second must see the first's nomination (even while the
// first's victims are still being written), not nominate itself to the
// same room: otherwise one of them binds there and the other must preempt
// all over again, with a longer backoff each time.
func TestConcurrentPreemptionsNeverShareRoom(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &slowEvictor{entered: make(chan struct{}), release: make(chan struct{}), status: make(chan string, 64)}
	s, err := New(ctx, Config{Shards: 2}, ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.s = s
	s.UpsertNode(&framework.Node{Name: "n1",
		Allocatable: framework.ResourceList{framework.ResourceCPU: 4000, framework.ResourcePods: 110}})
	for i := range 4 {
		s.UpsertPod(cpuPod(fmt.Sprintf("victim-%d", i), 1, 900, "n1"))
	}
	// Preemptors handled by different shards, so they preempt concurrently.
	first := cpuPod("preemptor-0", 100, 3000, "")
	var second *framework.Pod
	for i := 1; second == nil; i++ {
		if p := cpuPod(fmt.Sprintf("preemptor-%d", i), 100, 3000, ""); s.shardFor(p) != s.shardFor(first) {
			second = p
		}
	}

	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(ev.release) }) }
	defer free() // a failing test must not leave the first eviction blocked

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	deadline := time.After(10 * time.Second)
	s.UpsertPod(first)
	select {
	case <-ev.entered:
	case <-deadline:
		t.Fatal("first preemptor never evicted")
	}
	// While the first preemptor's eviction is in flight, the second fails
	// and preempts in the other shard.
	s.UpsertPod(second)
	for waiting := true; waiting; {
		select {
		case key := <-ev.status:
			waiting = key != second.Key()
		case <-deadline:
			t.Fatal("second preemptor's attempt never ended")
		}
	}
	free()
	cancel()
	<-done

	ev.mu.Lock()
	defer ev.mu.Unlock()
	want := []evictCall{{Preemptor: first.Key(), Node: "n1", Nominated: true}}
	if diff := cmp.Diff(want, ev.calls); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
	var nominated []string
	for _, pi := range s.nominator.NominatedPodsForNode("n1") {
		nominated = append(nominated, pi.Pod.Key())
	}
	if diff := cmp.Diff([]string{first.Key()}, nominated); diff != "" {
		t.Errorf("nominated to n1 (-want +got):\n%s", diff)
	}
}

// evictRecorder is a Committer that records what it was asked to evict.
type evictRecorder struct {
	nopCommitter
	mu      sync.Mutex
	victims []*framework.Pod
}

func (e *evictRecorder) Evict(_ context.Context, _ *framework.Pod, _ string, victims []*framework.Pod) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.victims = append(e.victims, victims...)
	return nil
}

// fullNode is a one-shard scheduler whose node n1 (4 cores) holds four
// priority-1 pods of victimCPU millicores each.
func fullNode(t *testing.T, victimCPU int64) (*Scheduler, *evictRecorder) {
	t.Helper()
	ev := &evictRecorder{}
	return fullNodeWith(t, ev, victimCPU), ev
}

// fullNodeWith is fullNode committing through c.
func fullNodeWith(t *testing.T, c Committer, victimCPU int64) *Scheduler {
	t.Helper()
	s, err := New(context.Background(), Config{Shards: 1}, c)
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1",
		Allocatable: framework.ResourceList{framework.ResourceCPU: 4000, framework.ResourcePods: 110}})
	for i := range 4 {
		s.UpsertPod(cpuPod(fmt.Sprintf("victim-%d", i), 1, victimCPU, "n1"))
	}
	return s
}

// TestPreemptorRetriedOnceVictimsAreGone: a preemptor waits, nominated,
// while its victims are being deleted; the deletion of the last one sends
// it straight to activeQ, not through backoff, since its room is free.
func TestPreemptorRetriedOnceVictimsAreGone(t *testing.T) {
	ctx := context.Background()
	s, ev := fullNode(t, 900)
	s.UpsertPod(cpuPod("preemptor", 100, 3000, ""))
	sh := s.shards[0]
	queued := func() [3]int {
		a, b, u := sh.queue.Len()
		return [3]int{a, b, u}
	}
	attempt := func() {
		t.Helper()
		qpi, err := sh.queue.Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sh.scheduleOne(ctx, qpi)
		s.binding.Wait()
	}

	attempt()
	if len(ev.victims) != 3 {
		t.Fatalf("evicted %v, want three victims", podNames(ev.victims))
	}
	if diff := cmp.Diff([]string{"ns/preemptor"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Fatalf("nominated to n1 (-want +got):\n%s", diff)
	}
	if got := queued(); got != [3]int{0, 0, 1} {
		t.Fatalf("queue active/backoff/unschedulable = %v, want the preemptor parked", got)
	}
	for i, v := range ev.victims {
		s.DeletePod(v)
		want := [3]int{0, 1, 0} // the deletion's event: retry after backoff
		if i == len(ev.victims)-1 {
			want = [3]int{1, 0, 0} // the room is free: retry now
		}
		if got := queued(); got != want {
			t.Fatalf("after deleting %s: queue active/backoff/unschedulable = %v, want %v", v.Name, got, want)
		}
	}
	attempt()
	if ni, _ := s.NodeInfo("n1"); len(ni.Pods) != 2 || ni.Requested.MilliCPU != 3900 {
		t.Errorf("n1 holds %d pods, %dm cpu; want the preemptor and one victim", len(ni.Pods), ni.Requested.MilliCPU)
	}
	// Assumed, it is charged to n1 by the cache: no nomination counts it
	// a second time while the watch has not confirmed it yet.
	if keys := nominatedKeys(s.nominator, "n1"); keys != nil {
		t.Errorf("still nominated to n1 once assumed: %v", keys)
	}
}

// TestPreemptionUnnominatesLowerPriorityPods: a pod nominated to a node
// loses the nomination when a more important pod preempts there, and is
// retried at once to look elsewhere.
func TestPreemptionUnnominatesLowerPriorityPods(t *testing.T) {
	ctx := context.Background()
	s, _ := fullNode(t, 1000)
	sh := s.shards[0]
	attempt := func(want string) {
		t.Helper()
		qpi, err := sh.queue.Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if qpi.Pod.Name != want {
			t.Fatalf("popped %s, want %s", qpi.Pod.Name, want)
		}
		sh.scheduleOne(ctx, qpi)
		s.binding.Wait()
	}

	// mid preempts two victims and waits for them, nominated to n1.
	s.UpsertPod(cpuPod("mid", 50, 2000, ""))
	attempt("mid")
	if diff := cmp.Diff([]string{"ns/mid"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Fatalf("nominated to n1 (-want +got):\n%s", diff)
	}
	// high needs the whole node: it preempts the other victims and takes
	// the room promised to mid.
	s.UpsertPod(cpuPod("high", 100, 4000, ""))
	attempt("high")
	if diff := cmp.Diff([]string{"ns/high"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Errorf("nominated to n1 after high preempted (-want +got):\n%s", diff)
	}
	if a, _, _ := sh.queue.Len(); a != 1 {
		t.Errorf("%d pods active; want mid, back to look elsewhere", a)
	}
	if _, waits := s.nominator.waitingOn["ns/mid"]; waits {
		t.Error("mid still waits for victims on a node it no longer holds")
	}
}

func podNames(ps []*framework.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// popAndSchedule runs one attempt of the shard's next pod, which must be
// want, and returns once the scheduling loop would have moved on.
func popAndSchedule(t *testing.T, sh *shard, want string) {
	t.Helper()
	qpi, err := sh.queue.Pop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if qpi.Pod.Name != want {
		t.Fatalf("popped %s, want %s", qpi.Pod.Name, want)
	}
	sh.scheduleOne(context.Background(), qpi)
}

// TestVictimMarksAreWrittenOffTheLoop: writing a preemption's victim marks
// waits for storage, and the shard's loop must not wait with it. The
// preemptor stays in flight until the write is done, then waits nominated.
func TestVictimMarksAreWrittenOffTheLoop(t *testing.T) {
	ev := &slowEvictor{entered: make(chan struct{}), release: make(chan struct{}), status: make(chan string, 64)}
	s, err := New(context.Background(), Config{Shards: 1}, ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.s = s
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(ev.release) }) }
	defer free()
	for _, n := range []string{"n1", "n2"} {
		s.UpsertNode(&framework.Node{Name: n,
			Allocatable: framework.ResourceList{framework.ResourceCPU: 4000, framework.ResourcePods: 110}})
	}
	for i := range 4 {
		s.UpsertPod(cpuPod(fmt.Sprintf("victim-%d", i), 1, 1000, "n1"))
	}
	s.UpsertPod(cpuPod("filler", 1000, 3500, "n2")) // not a victim: more important
	sh := s.shards[0]

	s.UpsertPod(cpuPod("preemptor", 100, 3000, ""))
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		popAndSchedule(t, sh, "preemptor")
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the preemptor's attempt did not return while its victims were being marked")
	}
	select {
	case <-ev.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the preemptor's victims were never marked")
	}
	if diff := cmp.Diff([]string{"ns/preemptor"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Fatalf("nominated to n1 while marking (-want +got):\n%s", diff)
	}
	// The loop goes on: the next pod is placed while the write still waits.
	s.UpsertPod(cpuPod("small", 1, 500, ""))
	popAndSchedule(t, sh, "small")
	if ni, _ := s.NodeInfo("n2"); ni.Requested.MilliCPU != 4000 {
		t.Fatalf("n2 has %dm cpu requested; want small placed there", ni.Requested.MilliCPU)
	}
	if a, b, u := sh.queue.Len(); a+b+u != 0 {
		t.Fatalf("queue active/backoff/unschedulable = %d/%d/%d while the preemptor is in flight, want empty", a, b, u)
	}

	free()
	s.binding.Wait()
	if a, b, u := sh.queue.Len(); a != 0 || b != 0 || u != 1 {
		t.Errorf("queue active/backoff/unschedulable = %d/%d/%d after the marks, want the preemptor parked", a, b, u)
	}
	if diff := cmp.Diff([]string{"ns/preemptor"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Errorf("nominated to n1 after marking (-want +got):\n%s", diff)
	}
}

// failingEvictor cannot mark victims; it records the statuses written.
type failingEvictor struct {
	nopCommitter
	mu       sync.Mutex
	recorded []Unschedulable
	pods     []*framework.Pod
}

func (*failingEvictor) Evict(context.Context, *framework.Pod, string, []*framework.Pod) error {
	return errors.New("storage unavailable")
}

func (e *failingEvictor) RecordUnschedulable(_ context.Context, p *framework.Pod, why Unschedulable) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recorded = append(e.recorded, why)
	e.pods = append(e.pods, p)
	return nil
}

// TestFailedVictimMarksUndoThePreemption: when the marks cannot be
// written, no victim will go, so the nomination made for them is taken
// back and the pod is parked saying why.
func TestFailedVictimMarksUndoThePreemption(t *testing.T) {
	ev := &failingEvictor{}
	s := fullNodeWith(t, ev, 1000)
	sh := s.shards[0]
	s.UpsertPod(cpuPod("preemptor", 100, 3000, ""))
	popAndSchedule(t, sh, "preemptor")
	s.binding.Wait()

	if keys := nominatedKeys(s.nominator, "n1"); keys != nil {
		t.Errorf("still nominated to n1 after the marks failed: %v", keys)
	}
	if len(s.nominator.waitingOn) != 0 || len(s.nominator.victimOf) != 0 {
		t.Errorf("victims still awaited: %v", s.nominator.waitingOn)
	}
	if a, b, u := sh.queue.Len(); a != 0 || b != 0 || u != 1 {
		t.Errorf("queue active/backoff/unschedulable = %d/%d/%d, want the preemptor parked", a, b, u)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.recorded) != 1 || !strings.Contains(ev.recorded[0].Message, "storage unavailable") || ev.pods[0].NominatedNodeName() != "" {
		t.Errorf("recorded %+v for %+v; want one diagnosis naming the failed write, no nominated node", ev.recorded, ev.pods)
	}
}

// TestStalePreemptionIsUndone: a shard's dry run reads its snapshot, but
// another shard may place a pod on the chosen node after that snapshot
// (and drop that pod's nomination, so this dry run saw it nowhere). The
// choice is undone before anything is written, for a retry on a fresh
// snapshot; with nothing placed since, it stands.
func TestStalePreemptionIsUndone(t *testing.T) {
	for _, placedSince := range []bool{false, true} {
		t.Run(fmt.Sprint("placed since: ", placedSince), func(t *testing.T) {
			ctx := context.Background()
			s, ev := fullNode(t, 900)
			sh := s.shards[0]
			pod := cpuPod("preemptor", 100, 3000, "")
			fwk := sh.frameworkFor(pod)
			placedBefore := s.cache.Placements()
			if err := s.cache.UpdateSnapshot(sh.snapshot); err != nil {
				t.Fatal(err)
			}
			qpi := &framework.QueuedPodInfo{PodInfo: framework.NewPodInfo(pod)}
			state := framework.NewCycleState()
			_, err := sh.algo.Schedule(ctx, fwk, state, qpi.PodInfo)
			var fitErr *framework.FitError
			if !errors.As(err, &fitErr) {
				t.Fatalf("Schedule = %v, want a FitError", err)
			}
			if placedSince {
				if err := s.cache.AssumePod(framework.NewPodInfo(cpuPod("other", 100, 100, "n1"))); err != nil {
					t.Fatal(err)
				}
			}
			_, evict, stale := sh.preempt(ctx, fwk, state, placedBefore, qpi, fitErr)
			if stale != placedSince {
				t.Fatalf("stale = %v, want %v", stale, placedSince)
			}
			nominated := nominatedKeys(s.nominator, "n1")
			if placedSince && (nominated != nil || len(s.nominator.waitingOn) != 0) {
				t.Errorf("undone preemption left nominations %v, victims %v", nominated, s.nominator.waitingOn)
			}
			if !placedSince && (len(nominated) != 1 || evict.write == nil) {
				t.Errorf("nominated %v, write left %v; want the preemptor nominated and its marks to write", nominated, evict.write != nil)
			}
			if len(ev.victims) != 0 {
				t.Errorf("marks written by the dry run itself: %v", podNames(ev.victims))
			}
		})
	}
}
