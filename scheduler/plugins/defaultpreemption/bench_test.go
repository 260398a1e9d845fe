package defaultpreemption

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// BenchmarkPreempt5000Nodes preempts for one pod over 5,000 nodes, each
// full with 32 low-priority pods: every node is a potential node, and the
// dry run visits kube's default 10% (500) of them.
func BenchmarkPreempt5000Nodes(b *testing.B) {
	const numNodes, podsPerNode = 5000, 32
	nodes := make([]*framework.NodeInfo, numNodes)
	for i := range nodes {
		pods := make([]*framework.Pod, podsPerNode)
		for j := range pods {
			pods[j] = started(pod(fmt.Sprintf("n%d-p%d", i, j), int32(j%4), 4000/podsPerNode), (i+j)%60)
		}
		nodes[i] = node(fmt.Sprintf("n%d", i), 4000, pods...)
	}
	for _, parallelism := range []int{1, 2} {
		b.Run(fmt.Sprintf("parallelism=%d", parallelism), func(b *testing.B) {
			e := newEnv(b, envConfig{opts: []runtime.Option{runtime.WithParallelism(parallelism)}}, nodes...)
			state, pi, m := e.filter(b, pod("p", 1000, 1000))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, st := e.pl.PostFilter(ctx, state, pi, m); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
