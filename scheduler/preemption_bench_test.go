package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// preemptionCluster is berth bench's preemption workload half way through:
// every node full with four 900m low-priority pods, and every other node
// nominated to a 3-core preemptor whose victims are not gone yet.
func preemptionCluster(b *testing.B, numNodes int) (*Scheduler, *shard) {
	b.Helper()
	s, err := New(context.Background(), Config{Shards: 1}, nopCommitter{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range numNodes {
		name := fmt.Sprintf("node-%05d", i)
		s.UpsertNode(&framework.Node{Name: name,
			Labels:      map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprint(i % 10)},
			Allocatable: framework.ResourceList{framework.ResourceCPU: 4000, framework.ResourceMemory: 32 << 30, framework.ResourcePods: 110}})
		for j := range 4 {
			p := cpuPod(fmt.Sprintf("victim-%d-%d", i, j), 1, 900, name)
			p.StartTime = start.Add(time.Duration(i*4+j) * time.Millisecond)
			s.UpsertPod(p)
		}
		if i%2 == 0 {
			p := cpuPod(fmt.Sprintf("nominated-%d", i), 100, 3000, "")
			p.EditExtras().NominatedNodeName = name
			s.nominator.set(framework.NewPodInfo(p), name)
		}
	}
	sh := s.shards[0]
	if err := s.cache.UpdateSnapshot(sh.snapshot); err != nil {
		b.Fatal(err)
	}
	return s, sh
}

// BenchmarkPreemptionCycle is the CPU a preemptor's failed cycle costs at
// 5,000 and 100,000 nodes: the filter pass that finds no node, then the
// dry run, which at 100,000 nodes weighs kube-scheduler's 10% of them as
// candidates.
func BenchmarkPreemptionCycle(b *testing.B) {
	for _, nodes := range []int{5000, 100000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			benchPreemptionCycle(b, nodes)
		})
	}
}

func benchPreemptionCycle(b *testing.B, nodes int) {
	ctx := context.Background()
	_, sh := preemptionCluster(b, nodes)
	fwk := sh.frameworks[DefaultProfileName]
	pi := framework.NewPodInfo(cpuPod("preemptor", 100, 3000, ""))
	var fitErr *framework.FitError
	b.Run("filter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, err := sh.algo.Schedule(ctx, fwk, framework.NewCycleState(), pi)
			if !errors.As(err, &fitErr) {
				b.Fatalf("want a fit error, got %v", err)
			}
		}
	})
	b.Run("dryrun", func(b *testing.B) {
		state := framework.NewCycleState()
		_, err := sh.algo.Schedule(ctx, fwk, state, pi)
		if !errors.As(err, &fitErr) {
			b.Fatalf("want a fit error, got %v", err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if plan := explainPreemption(ctx, fwk, pi, fitErr); plan == nil || plan.Node == "" {
				b.Fatalf("no preemption: %+v", plan)
			}
		}
	})
}
