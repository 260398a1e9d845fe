package scheduler

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
)

// nopCommitter accepts every decision; these tests look at the cache.
type nopCommitter struct{}

func (nopCommitter) Bind(context.Context, *framework.Pod, string) error { return nil }
func (nopCommitter) RecordUnschedulable(context.Context, *framework.Pod, Unschedulable) error {
	return nil
}
func (nopCommitter) Evict(context.Context, *framework.Pod, string, []*framework.Pod) error {
	return nil
}

func podWith(name string, labels map[string]string, anti *framework.PodAntiAffinity) *framework.Pod {
	return &framework.Pod{
		Namespace: "ns", Name: name, UID: name, Labels: labels, Phase: framework.PodPending,
		Containers: []framework.Container{{Name: "c", Requests: framework.ResourceList{framework.ResourceCPU: 100}}},
		Affinity:   &framework.Affinity{PodAntiAffinity: anti},
	}
}

// TestAssumeRechecksPodsPlacedSinceSnapshot: a shard chose a node for a pod
// with hostname anti-affinity from a snapshot; another shard then placed a
// pod it repels on that node. The assumption must be refused (and retried),
// or both would share the node.
func TestAssumeRechecksPodsPlacedSinceSnapshot(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Config{Shards: 2}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"},
		Allocatable: framework.ResourceList{framework.ResourceCPU: 10000, framework.ResourcePods: 110}})
	anti := &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
		LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		TopologyKey:   "kubernetes.io/hostname",
	}}}

	tests := []struct {
		name        string
		pod         *framework.Pod
		placedLater *framework.Pod
		wantRefused bool
	}{
		{"own anti-affinity against a pod placed since", podWith("y", map[string]string{"app": "db"}, anti), podWith("x", map[string]string{"app": "db"}, nil), true},
		{"a pod placed since repels this one", podWith("y2", map[string]string{"app": "db"}, nil), podWith("x2", map[string]string{"app": "web"}, anti), true},
		{"unrelated pod placed since", podWith("y3", map[string]string{"app": "db"}, anti), podWith("x3", map[string]string{"app": "web"}, nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sh := s.shards[0]
			fwk := sh.frameworkFor(tc.pod)
			placedBefore := s.cache.Placements()
			if err := s.cache.UpdateSnapshot(sh.snapshot); err != nil {
				t.Fatal(err)
			}
			pi := framework.NewPodInfo(tc.pod)
			state := framework.NewCycleState()
			res, err := sh.algo.Schedule(ctx, fwk, state, pi)
			if err != nil || res.SuggestedHost != "n1" {
				t.Fatalf("Schedule = %v, %v; want n1", res, err)
			}
			later := *tc.placedLater
			later.NodeName = "n1"
			if err := s.cache.AssumePod(framework.NewPodInfo(&later)); err != nil {
				t.Fatal(err)
			}
			assumed := assumedCopy(tc.pod, "n1", 0, 0)
			_, err = sh.assume(ctx, fwk, state, placedBefore, pi, pi.WithPod(assumed))
			if refused := errors.Is(err, cache.ErrNodeChanged); refused != tc.wantRefused {
				t.Fatalf("assume = %v; refused %v, want %v", err, refused, tc.wantRefused)
			}
			// Leave the cache as it was for the next case.
			if !tc.wantRefused {
				if err := s.cache.ForgetPod(assumed); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.cache.ForgetPod(&later); err != nil {
				t.Fatal(err)
			}
		})
	}
}
