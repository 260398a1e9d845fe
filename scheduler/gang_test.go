package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// gangCommitter records what the core commits; it implements GroupBinder.
type gangCommitter struct {
	mu        sync.Mutex
	singles   []string
	groups    [][]string
	assumed   []string
	unassumed []string
	// failGroups fails that many BindGroup calls with ErrCommitConflict.
	failGroups int
	changed    chan struct{}
}

func newGangCommitter() *gangCommitter { return &gangCommitter{changed: make(chan struct{}, 1)} }

func (c *gangCommitter) record(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *gangCommitter) Bind(_ context.Context, p *framework.Pod, _ string) error {
	c.record(func() { c.singles = append(c.singles, p.Name) })
	return nil
}

func (c *gangCommitter) BindGroup(_ context.Context, pods []*framework.Pod) error {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	var err error
	c.record(func() {
		if c.failGroups > 0 {
			c.failGroups--
			err = fmt.Errorf("%w: a node filled", ErrCommitConflict)
			return
		}
		c.groups = append(c.groups, names)
	})
	return err
}

func (c *gangCommitter) Assume(_ context.Context, pods []*framework.Pod) error {
	c.record(func() {
		for _, p := range pods {
			c.assumed = append(c.assumed, p.Name)
		}
	})
	return nil
}

func (c *gangCommitter) Unassume(_ context.Context, pods []*framework.Pod) error {
	c.record(func() {
		for _, p := range pods {
			c.unassumed = append(c.unassumed, p.Name)
		}
	})
	return nil
}

func (*gangCommitter) RecordUnschedulable(context.Context, *framework.Pod, Unschedulable) error {
	return nil
}

func (*gangCommitter) Evict(context.Context, *framework.Pod, string, []*framework.Pod) error {
	return nil
}

// waitFor waits, on the committer's signal, until cond holds.
func (c *gangCommitter) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%s: not before the deadline; singles %v, groups %v, assumed %v, unassumed %v", what, c.singles, c.groups, c.assumed, c.unassumed)
		}
	}
}

func gangMember(name, group string, cpu int64) *framework.Pod {
	return &framework.Pod{
		Namespace: "ns", Name: name, UID: "uid-" + name, Phase: framework.PodPending, PodGroup: group,
		Containers: []framework.Container{{Name: "c", Requests: framework.ResourceList{framework.ResourceCPU: cpu}}},
	}
}

// startGangScheduler runs a scheduler with one node of the given cpu.
func startGangScheduler(t *testing.T, c Committer, cpu int64) *Scheduler {
	return startScheduler(t, c, Config{Shards: 2}, cpu, func(*Scheduler) {})
}

// startScheduler runs a scheduler of cfg with one node of the given cpu,
// after before has set what it needs, until the test ends.
func startScheduler(t *testing.T, c Committer, cfg Config, cpu int64, before func(*Scheduler)) *Scheduler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	before(s)
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: cpu, framework.ResourcePods: 100}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// The members of a gang are committed by one BindGroup, never one by one;
// pods outside any group bind as before.
func TestGangCommitsInOneBindGroup(t *testing.T) {
	c := newGangCommitter()
	s := startGangScheduler(t, c, 10000)
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 3, ScheduleTimeout: time.Minute})
	for _, name := range []string{"a", "b", "c"} {
		s.UpsertPod(gangMember(name, "g", 100))
	}
	s.UpsertPod(gangMember("solo", "", 100))
	c.waitFor(t, "gang and solo bound", func() bool { return len(c.groups) == 1 && len(c.singles) == 1 })
	if diff := cmp.Diff([][]string{{"a", "b", "c"}}, c.groups); diff != "" {
		t.Errorf("gang commits (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"solo"}, c.singles); diff != "" {
		t.Errorf("single binds (-want,+got):\n%s", diff)
	}
}

// A failed joint commit forgets every member; they are retried and
// committed together again.
func TestGangCommitConflictRetriesEveryMember(t *testing.T) {
	c := newGangCommitter()
	c.failGroups = 1
	s := startGangScheduler(t, c, 10000)
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 2, ScheduleTimeout: time.Minute})
	s.UpsertPod(gangMember("a", "g", 100))
	s.UpsertPod(gangMember("b", "g", 100))
	c.waitFor(t, "gang committed after a conflict", func() bool { return len(c.groups) == 1 })
	if diff := cmp.Diff([][]string{{"a", "b"}}, c.groups); diff != "" {
		t.Errorf("gang commits (-want,+got):\n%s", diff)
	}
	if len(c.singles) != 0 {
		t.Errorf("members bound alone: %v", c.singles)
	}
}

// Members wait, gated, for their group; its creation lets them in.
func TestMembersWaitForTheirGroup(t *testing.T) {
	c := newGangCommitter()
	s := startGangScheduler(t, c, 10000)
	s.UpsertPod(gangMember("a", "late", 100))
	s.UpsertPod(gangMember("b", "late", 100))
	sh := s.shardFor(gangMember("a", "late", 0))
	if active, backoff, unsched := sh.queue.Len(); active != 0 || backoff != 0 || unsched != 2 {
		t.Fatalf("queue %d/%d/%d, want both members gated", active, backoff, unsched)
	}
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "late", MinMember: 2, ScheduleTimeout: time.Minute})
	c.waitFor(t, "gang bound once its group exists", func() bool { return len(c.groups) == 1 })
	if members, bound := s.PodGroupMembers("ns", "late"); members != 2 || bound != 0 {
		t.Errorf("members %d, bound %d; want 2 stored, none bound until the watch says so", members, bound)
	}
}

// Members that fit but cannot reach min_member wait, then are all
// released: none bound, every assumption dropped, no room held.
func TestGangTimeoutReleasesEveryMember(t *testing.T) {
	c := newGangCommitter()
	s := startGangScheduler(t, c, 250) // room for two of three
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 3, ScheduleTimeout: 50 * time.Millisecond})
	for _, name := range []string{"a", "b", "c"} {
		s.UpsertPod(gangMember(name, "g", 100))
	}
	c.waitFor(t, "two members held, then released", func() bool {
		return len(c.assumed) >= 2 && len(c.unassumed) >= 2
	})
	if len(c.groups) != 0 || len(c.singles) != 0 {
		t.Fatalf("bound: groups %v, singles %v", c.groups, c.singles)
	}
	eventually(t, "no room held on n1", func() error {
		ni, _ := s.NodeInfo("n1")
		if len(ni.Pods) != 0 {
			return fmt.Errorf("%d pods on n1", len(ni.Pods))
		}
		return nil
	})
}

func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		<-tick.C
	}
}

// A bound pod deleted by name alone (what the replica's watch reports, as
// it does not ask etcd for previous values) gives its node's room back.
func TestDeleteByNameFreesABoundPod(t *testing.T) {
	s, err := New(context.Background(), Config{Shards: 2}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: 1000, framework.ResourcePods: 10}})
	s.UpsertPod(cpuPod("p", 0, 300, "n1"))
	if got, want := loadedState(s).Nodes["n1"], "node=true cpu=300 pods=[ns/p]"; got != want {
		t.Fatalf("before the delete: %s, want %s", got, want)
	}
	s.DeletePod(&framework.Pod{Namespace: "ns", Name: "p"})
	if got, want := loadedState(s).Nodes["n1"], "node=true cpu=0 pods=[]"; got != want {
		t.Errorf("after the delete: %s, want %s", got, want)
	}
}

// A deleted pod known only by name (what the replica's watch reports)
// leaves its shard's queue even when it is a gang member, whose shard
// follows its group and not its name.
func TestDeleteByNameForgetsAPendingGangMember(t *testing.T) {
	s, err := New(context.Background(), Config{Shards: 2}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertPodGroup(&framework.PodGroup{Namespace: "ns", Name: "g", MinMember: 2, ScheduleTimeout: time.Minute})
	// A member whose name alone would pick the other shard loop.
	var member *framework.Pod
	for i := 0; member == nil; i++ {
		p := gangMember(fmt.Sprintf("m%d", i), "g", 100)
		byName := *p
		byName.PodGroup = ""
		if s.shardFor(p) != s.shardFor(&byName) {
			member = p
		}
	}
	s.UpsertPod(member)
	if got := loadedState(s).Pending; !slices.ContainsFunc(got, func(keys []string) bool { return len(keys) == 1 }) {
		t.Fatalf("member not pending: %v", got)
	}
	s.DeletePod(&framework.Pod{Namespace: member.Namespace, Name: member.Name})
	for i, keys := range loadedState(s).Pending {
		if len(keys) > 0 {
			t.Errorf("shard loop %d still holds %v after the delete", i, keys)
		}
	}
	if members, _ := s.PodGroupMembers("ns", "g"); members != 0 {
		t.Errorf("group still counts %d members", members)
	}
}
