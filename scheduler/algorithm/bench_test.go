package algorithm

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

// benchCluster is n nodes of 32 cores, 128Gi and 110 pods, each running
// ten pods of mixed sizes, a few with a PreferNoSchedule taint.
func benchCluster(n int) []*framework.NodeInfo {
	nodes := make([]*framework.NodeInfo, n)
	for i := range nodes {
		node := fwtest.Node(fmt.Sprintf("node-%05d", i), 32000, 128*Gi, 110)
		node.Labels = map[string]string{"zone": fmt.Sprint("z", i%3)}
		if i%10 == 0 {
			node.Taints = []framework.Taint{{Key: "spot", Effect: framework.TaintEffectPreferNoSchedule}}
		}
		var pods []*framework.Pod
		for j := range 10 {
			pods = append(pods, fwtest.Pod(fmt.Sprintf("n%d-p%d", i, j), fwtest.Resources(int64(100+(i+j)%7*250), int64(1+(i*j)%5)*Gi/2)))
		}
		nodes[i] = fwtest.NodeInfo(node, pods...)
	}
	return nodes
}

// BenchmarkSchedule is one scheduling cycle of a one-container pod
// (cpu+memory) over 5,000 nodes with the default plugins: adaptive window
// of 500 nodes filtered and scored.
func BenchmarkSchedule(b *testing.B) {
	nodes := benchCluster(5000)
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("nodes=5000/parallelism=%d", par), func(b *testing.B) {
			fwk := setup(b, nodes, par)
			s := New(0, WithRandSeed(1, 2))
			pod := framework.NewPodInfo(fwtest.Pod("bench", fwtest.Resources(100, Gi/4)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Schedule(ctx, fwk, framework.NewCycleState(), pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExplain is a dry run over all 5,000 nodes.
func BenchmarkExplain(b *testing.B) {
	nodes := benchCluster(5000)
	fwk := setup(b, nodes, 1)
	s := New(0)
	pod := framework.NewPodInfo(fwtest.Pod("bench", fwtest.Resources(100, Gi/4)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Explain(ctx, fwk, framework.NewCycleState(), pod); err != nil {
			b.Fatal(err)
		}
	}
}
