package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// conflictingAssumer fails its first `fail` assumption writes with
// ErrCommitConflict, as the store does when another replica took the room.
type conflictingAssumer struct {
	*gangCommitter
	fail     atomic.Int32
	failures atomic.Int32
}

func (c *conflictingAssumer) Assume(ctx context.Context, pods []*framework.Pod) error {
	if c.fail.Add(-1) >= 0 {
		c.failures.Add(1)
		c.record(func() {})
		return fmt.Errorf("%w: the node filled", ErrCommitConflict)
	}
	return c.gangCommitter.Assume(ctx, pods)
}

// A member whose assumption cannot be written (the room went to another
// replica) stops waiting at once, instead of holding the room until its
// gang's timeout, and is retried like any released member.
func TestAssumptionConflictRejectsTheWaitingMember(t *testing.T) {
	gc := newGangCommitter()
	c := &conflictingAssumer{gangCommitter: gc}
	c.fail.Store(1)
	// Room for two members of three: they wait at Permit.
	s := startGangScheduler(t, c, 250)
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 3, ScheduleTimeout: 10 * time.Minute})
	for _, name := range []string{"a", "b", "c"} {
		s.UpsertPod(gangMember(name, "g", 100))
	}
	// The failed write releases its member long before the timeout: its
	// (possibly landed) assumption is dropped.
	gc.waitFor(t, "a member released after the conflict", func() bool { return len(gc.unassumed) >= 1 })
	if c.failures.Load() != 1 {
		t.Fatalf("%d failed assumption writes, want 1", c.failures.Load())
	}
	// Retried once there is room, the gang binds whole.
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: 1000, framework.ResourcePods: 100}})
	gc.waitFor(t, "gang bound", func() bool { return len(gc.groups) == 1 })
	if diff := cmp.Diff([][]string{{"a", "b", "c"}}, gc.groups); diff != "" {
		t.Errorf("gang commits (-want,+got):\n%s", diff)
	}
}
