package scheduler

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

func feedbackNode(name string, rev int64) *framework.Node {
	return &framework.Node{Name: name, Revision: rev,
		Allocatable: framework.ResourceList{framework.ResourceCPU: 1000, framework.ResourcePods: 10}}
}

// A pod sent back from its node leaves the node at once and waits out a
// backoff before it is tried again.
func TestRejectedPodLeavesItsNodeAndBacksOff(t *testing.T) {
	s, err := New(context.Background(), Config{Shards: 1}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(feedbackNode("n1", 5))
	bound := cpuPod("p", 0, 300, "n1")
	bound.Phase = framework.PodBound
	s.UpsertPod(bound)
	if ni, _ := s.NodeInfo("n1"); len(ni.Pods) != 1 {
		t.Fatalf("n1 holds %d pods, want the bound one", len(ni.Pods))
	}

	rejected := cpuPod("p", 0, 300, "")
	rejected.Phase = framework.PodPending
	rejected.EditExtras().Rejections = map[string]int64{"n1": 5}
	s.UpsertPod(rejected)
	if ni, _ := s.NodeInfo("n1"); len(ni.Pods) != 0 || ni.Requested.MilliCPU != 0 {
		t.Fatalf("n1 still holds %d pods, %dm cpu after the rejection", len(ni.Pods), ni.Requested.MilliCPU)
	}
	if active, backoff, unsched := s.shards[0].queue.Len(); active != 0 || backoff != 1 || unsched != 0 {
		t.Fatalf("queue active/backoff/unschedulable = %d/%d/%d, want the pod backing off", active, backoff, unsched)
	}
}

// A node record that changes only in revision wakes the pods it rejected,
// and only those.
func TestNodeRecordUpdateWakesRejectedPods(t *testing.T) {
	s, err := New(context.Background(), Config{Shards: 1}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(feedbackNode("n1", 5))
	sh := s.shards[0]
	park := func(name, rejectedBy string) {
		p := cpuPod(name, 0, 100, "")
		p.Phase = framework.PodPending
		p.EditExtras().Rejections = map[string]int64{rejectedBy: 5}
		qpi := &framework.QueuedPodInfo{PodInfo: framework.NewPodInfo(p),
			UnschedulablePlugins: map[string]struct{}{names.RejectedNodes: {}}}
		if err := sh.queue.AddUnschedulableIfNotPresent(qpi); err != nil {
			t.Fatal(err)
		}
	}
	park("by-n1", "n1")
	park("by-n2", "n2")

	s.UpsertNodeRecord(feedbackNode("n1", 5)) // same record: nothing
	if _, _, unsched := sh.queue.Len(); unsched != 2 {
		t.Fatalf("%d unschedulable after an unchanged record, want 2", unsched)
	}
	s.UpsertNodeRecord(feedbackNode("n1", 9))
	active, backoff, unsched := sh.queue.Len()
	if active+backoff != 1 || unsched != 1 {
		t.Fatalf("queue active/backoff/unschedulable = %d/%d/%d, want only by-n1 woken", active, backoff, unsched)
	}
}

// TestNominationsOfOtherReplicasCount: a pending pod another replica
// schedules, recorded as nominated to a node, counts on that node here
// until its record drops the nomination; this replica's own nominations
// are not overwritten by records.
func TestNominationsOfOtherReplicasCount(t *testing.T) {
	s, err := New(context.Background(), Config{Shards: 1, OwnNone: true}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1",
		Allocatable: framework.ResourceList{framework.ResourceCPU: 4000, framework.ResourcePods: 110}})
	p := cpuPod("elsewhere", 100, 3000, "")
	p.EditExtras().NominatedNodeName = "n1"
	s.UpsertPod(p)
	if diff := cmp.Diff([]string{"ns/elsewhere"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Fatalf("nominated to n1 (-want +got):\n%s", diff)
	}
	// Another pod's filter counts it: 3000m nominated leave 1000m.
	ni, _ := s.NodeInfo("n1")
	incoming := framework.NewPodInfo(cpuPod("incoming", 100, 2000, ""))
	if against, _ := s.nominator.NominatedPodsAgainst(ni, incoming.Pod); len(against) != 1 {
		t.Errorf("%d nominated pods count against another pod on n1, want 1", len(against))
	}

	cleared := *p
	cleared.EditExtras().NominatedNodeName = ""
	s.UpsertPod(&cleared)
	if keys := nominatedKeys(s.nominator, "n1"); keys != nil {
		t.Errorf("still nominated after the record dropped it: %v", keys)
	}

	// Owned here, the pod's nomination is this replica's: a record does
	// not move it.
	s.AcquireShard(s.ShardOf(p), 1)
	s.nominator.set(framework.NewPodInfo(p), "n1")
	moved := *p
	moved.EditExtras().NominatedNodeName = "n2"
	s.UpsertPod(&moved)
	if diff := cmp.Diff([]string{"ns/elsewhere"}, nominatedKeys(s.nominator, "n1")); diff != "" {
		t.Errorf("own nomination moved by a record (-want +got):\n%s", diff)
	}
}
