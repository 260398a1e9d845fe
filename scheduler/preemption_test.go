package scheduler

import (
	"context"
	"fmt"
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
