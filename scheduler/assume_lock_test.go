package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// TestAssumeSharesThePlacementLock: a pod with no cross-pod terms assumes
// while another assumption holds placeMu shared (shard loops assume such
// pods side by side); a pod with anti-affinity waits for it, since its
// re-check must see every placement before its own.
func TestAssumeSharesThePlacementLock(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Config{Shards: 1}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertNode(&framework.Node{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"},
		Allocatable: framework.ResourceList{framework.ResourceCPU: 10000, framework.ResourcePods: 110}})
	anti := &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
		LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		TopologyKey:   "kubernetes.io/hostname",
	}}}
	sh := s.shards[0]
	assume := func(p *framework.Pod) <-chan error {
		done := make(chan error, 1)
		go func() {
			fwk := sh.frameworkFor(p)
			placedBefore := s.cache.Placements()
			pi := framework.NewPodInfo(p)
			_, err := sh.assume(ctx, fwk, framework.NewCycleState(), placedBefore, pi, pi.WithPod(assumedCopy(p, "n1", 0, 0)))
			done <- err
		}()
		return done
	}
	// Wait long enough for a healthy run never to hit it, short enough
	// that a deadlock fails the test rather than the whole run.
	wait := func(done <-chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still waiting for the placement lock", what)
		}
	}

	s.placeMu.RLock()
	wait(assume(podWith("plain", map[string]string{"app": "web"}, nil)), "plain pod under a shared lock")
	repelling := assume(podWith("repelling", map[string]string{"app": "db"}, anti))
	select {
	case err := <-repelling:
		t.Fatalf("a pod with anti-affinity assumed (%v) while another assumption held the lock", err)
	default:
	}
	s.placeMu.RUnlock()
	wait(repelling, "pod with anti-affinity once the lock is free")
}
