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

// heldCommitter holds every Bind until the test lets one go, counting the
// binds in flight.
type heldCommitter struct {
	nopCommitter
	mu       sync.Mutex
	inFlight int
	most     int
	bound    int
	arrived  chan struct{}
	release  chan struct{}
	finished chan struct{}
}

func (c *heldCommitter) Bind(ctx context.Context, _ *framework.Pod, _ string) error {
	c.mu.Lock()
	c.inFlight++
	c.most = max(c.most, c.inFlight)
	c.mu.Unlock()
	c.arrived <- struct{}{}
	select {
	case <-c.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	c.inFlight--
	c.bound++
	c.mu.Unlock()
	c.finished <- struct{}{}
	return nil
}

// With MaxBindsInFlight 2, no more than two pods wait for their commit at
// once however many are placed; the rest wait their turn and all bind.
func TestBindsInFlightAreBounded(t *testing.T) {
	const pods, limit = 6, 2
	c := &heldCommitter{arrived: make(chan struct{}), release: make(chan struct{}), finished: make(chan struct{}, pods)}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{Shards: 2, MaxBindsInFlight: limit}, c)
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: 10000, framework.ResourcePods: 100}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	for i := range pods {
		s.UpsertPod(gangMember(fmt.Sprintf("p%d", i), "", 100))
	}
	// Binds are let go a full set at a time, so that without the bound
	// the other pods would pile up in Bind meanwhile.
	deadline := time.After(10 * time.Second)
	for next := 0; next < pods; next += limit {
		for i := next; i < min(next+limit, pods); i++ {
			select {
			case <-c.arrived:
			case <-deadline:
				t.Fatalf("bind %d of %d never arrived", i+1, pods)
			}
		}
		for i := next; i < min(next+limit, pods); i++ {
			c.release <- struct{}{}
		}
	}
	for i := range pods {
		select {
		case <-c.finished:
		case <-deadline:
			t.Fatalf("bind %d of %d never finished", i+1, pods)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.most > limit {
		t.Errorf("%d binds were in flight at once; want at most %d", c.most, limit)
	}
	if c.bound != pods {
		t.Errorf("%d pods bound; want %d", c.bound, pods)
	}
}

// Gang members held at Permit take no slot: with a single slot a gang of
// three still gathers and commits.
func TestHeldGangMembersTakeNoBindSlot(t *testing.T) {
	c := newGangCommitter()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{Shards: 2, MaxBindsInFlight: 1}, c)
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: 10000, framework.ResourcePods: 100}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 3, ScheduleTimeout: time.Minute})
	for _, name := range []string{"a", "b", "c"} {
		s.UpsertPod(gangMember(name, "g", 100))
	}
	s.UpsertPod(gangMember("solo", "", 100))
	c.waitFor(t, "gang and solo bound", func() bool { return len(c.groups) == 1 && len(c.singles) == 1 })
	if diff := cmp.Diff([][]string{{"a", "b", "c"}}, c.groups); diff != "" {
		t.Errorf("gang commits (-want,+got):\n%s", diff)
	}
}
