package scheduler

import (
	"context"
	"testing"

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
	rejected.Rejections = map[string]int64{"n1": 5}
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
		p.Rejections = map[string]int64{rejectedBy: 5}
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
