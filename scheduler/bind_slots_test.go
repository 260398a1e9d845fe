package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// heldCommitter holds every Bind until release is closed, counting the
// binds waiting at once (under the gangCommitter's lock and signal).
type heldCommitter struct {
	gangCommitter
	release              chan struct{}
	waiting, most, bound int
}

func newHeldCommitter() *heldCommitter {
	return &heldCommitter{gangCommitter: *newGangCommitter(), release: make(chan struct{})}
}

func (c *heldCommitter) Bind(ctx context.Context, p *framework.Pod, _ string) error {
	c.record(func() {
		c.waiting++
		c.most = max(c.most, c.waiting)
	})
	defer c.record(func() { c.waiting--; c.bound++ })
	select {
	case <-c.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startBoundedScheduler runs a two-loop scheduler allowing limit binding
// cycles, with one roomy node; waited receives every wait for a slot.
func startBoundedScheduler(t *testing.T, c Committer, limit int) (*Scheduler, chan struct{}) {
	t.Helper()
	waited := make(chan struct{}, 1)
	s := startScheduler(t, c, Config{Shards: 2, MaxBindingCycles: limit}, 100000, func(s *Scheduler) {
		s.bindSlots.waited = func() {
			select {
			case waited <- struct{}{}:
			default:
			}
		}
	})
	return s, waited
}

// Binding cycles beyond the bound wait as pods in the queue, not as
// goroutines holding assumed pods; they all bind once commits end.
func TestBindingCyclesAreBounded(t *testing.T) {
	c := newHeldCommitter()
	s, waited := startBoundedScheduler(t, c, 3)
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		s.UpsertPod(gangMember(name, "", 100))
	}
	c.waitFor(t, "three binds waiting", func() bool { return c.waiting >= 3 })
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("no shard loop waited for a binding slot")
	}
	// A loop waits only once every slot is taken: by now no fourth
	// binding can have started.
	c.mu.Lock()
	most := c.most
	c.mu.Unlock()
	if most != 3 {
		t.Fatalf("%d binds waited at once, want at most 3", most)
	}
	if got := s.bindSlots.inUse(); got < 3 {
		t.Fatalf("%d slots in use while 3 binds wait", got)
	}
	close(c.release)
	c.waitFor(t, "every pod bound", func() bool { return c.bound == 8 && c.most == 3 })
}

// Members waiting at Permit for the rest of their gang hold no slot, so a
// gang larger than the bound still binds.
func TestGangLargerThanTheBindingBoundBinds(t *testing.T) {
	c := newGangCommitter()
	s, _ := startBoundedScheduler(t, c, 1)
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 4, ScheduleTimeout: time.Minute})
	for _, name := range []string{"a", "b", "c", "d"} {
		s.UpsertPod(gangMember(name, "g", 100))
	}
	c.waitFor(t, "the gang bound", func() bool { return len(c.groups) == 1 && len(c.groups[0]) == 4 })
}
