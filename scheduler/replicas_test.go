package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// scriptedCommitter records binds and answers each from a script (nil once
// the script runs out).
type scriptedCommitter struct {
	nopCommitter
	mu     sync.Mutex
	script []error
	binds  chan *framework.Pod
}

func (c *scriptedCommitter) Bind(_ context.Context, p *framework.Pod, _ string) error {
	c.mu.Lock()
	var err error
	if len(c.script) > 0 {
		err, c.script = c.script[0], c.script[1:]
	}
	c.mu.Unlock()
	c.binds <- p
	return err
}

func runScheduler(t *testing.T, c Committer) *Scheduler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{Shards: 2, OwnNone: true}, c)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: 10000, framework.ResourcePods: 110}})
	return s
}

func nextBind(t *testing.T, c *scriptedCommitter) *framework.Pod {
	t.Helper()
	select {
	case p := <-c.binds:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no bind")
		return nil
	}
}

func queued(s *Scheduler, p *framework.Pod) int {
	active, backoff, unschedulable := s.shardFor(p).queue.Len()
	return active + backoff + unschedulable
}

// A replica schedules only the pods of shards it owns, and fences each
// commit with the shard's epoch and the view the placement saw.
func TestOwnershipGatesScheduling(t *testing.T) {
	c := &scriptedCommitter{binds: make(chan *framework.Pod, 8)}
	s := runScheduler(t, c)
	s.SetViewRevision(7)
	p := podWith("p", nil, nil)
	s.UpsertPod(p)
	if n := queued(s, p); n != 0 || s.OwnsPod(p) {
		t.Fatalf("pod of an unowned shard: %d queued, owned %v", n, s.OwnsPod(p))
	}
	shard := s.ShardOf(p)
	s.AcquireShard(shard, 42)
	got := nextBind(t, c)
	if got.Shard() != shard || got.ShardEpoch() != 42 || got.ViewRevision() != 7 || got.NodeName != "n1" {
		t.Fatalf("bound %+v: want shard %d epoch 42 view 7 on n1", got, shard)
	}

	s.ReleaseShard(shard)
	q := podWith("q", nil, nil)
	q.Name = p.Name // same key, so the same shard
	q.UID = "q"
	s.UpsertPod(q)
	if n := queued(s, q); n != 0 {
		t.Fatalf("%d queued after the shard was released", n)
	}
}

// A binding refused because another writer charged the node after the
// placement's view waits for the cache to catch up before it is retried.
func TestStaleViewRetriesOnceTheViewCatchesUp(t *testing.T) {
	c := &scriptedCommitter{binds: make(chan *framework.Pod, 8), script: []error{&NodeChargedError{Revision: 100}}}
	s := runScheduler(t, c)
	s.SetViewRevision(10)
	p := podWith("p", nil, nil)
	s.UpsertPod(p)
	s.AcquireShard(s.ShardOf(p), 1)
	if first := nextBind(t, c); first.ViewRevision() != 10 {
		t.Fatalf("first attempt with view %d", first.ViewRevision())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.viewMu.Lock()
		waiting := len(s.viewWaiters)
		s.viewMu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refused pod is not waiting for the view")
		}
		time.Sleep(time.Millisecond)
	}
	s.SetViewRevision(99)
	if n := queued(s, p); n != 0 {
		t.Fatalf("retried before the view reached the conflicting revision (%d queued)", n)
	}
	s.SetViewRevision(100)
	if second := nextBind(t, c); second.ViewRevision() != 100 {
		t.Fatalf("retry with view %d, want 100", second.ViewRevision())
	}
}
