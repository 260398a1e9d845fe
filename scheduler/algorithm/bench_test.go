package algorithm

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

// benchCluster is n nodes of 32 cores, 128Gi and 110 pods, each running
// podsPerNode pods of mixed sizes, a few with a PreferNoSchedule taint.
// Every fifth pod is labelled app=web, for spreading and anti-affinity.
func benchCluster(n, podsPerNode int) []*framework.NodeInfo {
	nodes := make([]*framework.NodeInfo, n)
	for i := range nodes {
		node := fwtest.Node(fmt.Sprintf("node-%06d", i), 32000, 128*Gi, 110)
		node.Labels = map[string]string{"zone": fmt.Sprint("z", i%3), framework.LabelHostname: node.Name}
		if i%10 == 0 {
			node.Taints = []framework.Taint{{Key: "spot", Effect: framework.TaintEffectPreferNoSchedule}}
		}
		var pods []*framework.Pod
		for j := range podsPerNode {
			p := fwtest.Pod(fmt.Sprintf("n%d-p%d", i, j), fwtest.Resources(int64(100+(i+j)%7*250), int64(1+(i*j)%5)*Gi/2))
			if (i+j)%5 == 0 {
				p.Labels = map[string]string{"app": "web"}
			}
			pods = append(pods, p)
		}
		nodes[i] = fwtest.NodeInfo(node, pods...)
	}
	return nodes
}

// snapshotOf returns a cache snapshot of nodes, as a shard loop reads one:
// the lists inter-pod affinity asks for are kept, not searched per call.
func snapshotOf(nodes []*framework.NodeInfo) *cache.Snapshot {
	var ns []*framework.Node
	var pods []*framework.Pod
	for _, ni := range nodes {
		ns = append(ns, ni.Node())
		for _, pi := range ni.Pods {
			p := *pi.Pod
			p.NodeName = ni.Node().Name
			pods = append(pods, &p)
		}
	}
	return cache.NewSnapshot(pods, ns)
}

// setupSnapshot is setup over a cache snapshot of nodes.
func setupSnapshot(b *testing.B, nodes []*framework.NodeInfo, par int) *runtime.Framework {
	fwk, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(snapshotOf(nodes)), runtime.WithParallelism(par))
	if err != nil {
		b.Fatal(err)
	}
	return fwk
}

// BenchmarkSchedule is one scheduling cycle of a one-container pod
// (cpu+memory) over 5,000 nodes with the default plugins: adaptive window
// of 500 nodes filtered and scored, on a cache snapshot. The snapshot does
// not change, so with signature batching every cycle after the first
// reuses every result: the batch of pods of one shape that arrives
// between two snapshot updates. BenchmarkPlace has the cluster change.
func BenchmarkSchedule(b *testing.B) {
	nodes := benchCluster(5000, 10)
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("nodes=5000/parallelism=%d", par), func(b *testing.B) {
			fwk := setupSnapshot(b, nodes, par)
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

// benchPod returns the i-th pod of a workload kind:
//   - basic: one container, the same shape every time (a deployment's
//     replicas);
//   - unique: like basic but every pod asks for a different amount of
//     memory, so no two share a signature (the memo's worst case);
//   - spread: basic with a zone spread constraint (DoNotSchedule);
//   - antiaffinity: basic with required anti-affinity to app=web pods per
//     host.
//
// Spread and anti-affinity pods are signed, their plugins' results
// checked per node by stamps, and their counts kept across cycles.
func benchPod(kind string, i int) *framework.Pod {
	p := fwtest.Pod(fmt.Sprintf("bench-%d", i), fwtest.Resources(100, Gi/4))
	switch kind {
	case "unique":
		p.Containers[0].Requests[framework.ResourceMemory] = Gi/4 + int64(i)*1024
	case "spread":
		p.Labels = map[string]string{"app": "web"}
		p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
			WhenUnsatisfiable: framework.DoNotSchedule, LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	case "antiaffinity":
		p.Labels = map[string]string{"app": "web"}
		p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
			LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "api"}}, TopologyKey: framework.LabelHostname}}}}
	}
	return p
}

// BenchmarkPlace schedules a stream of pods of one kind as a shard loop
// does: the snapshot is brought up to date from a cache before each cycle
// and the pod is assumed on the node chosen, so every cycle sees the
// previous one's node changed. Each kind runs with signature batching on
// and off; "off" is the placer as it was before batching. 100,000 nodes
// hold two pods each, to keep the benchmark's memory small.
func BenchmarkPlace(b *testing.B) {
	for _, size := range []struct{ nodes, podsPerNode int }{{5000, 10}, {100000, 2}} {
		b.Run(fmt.Sprintf("nodes=%d", size.nodes), func(b *testing.B) {
			c := benchCache(b, size.nodes, size.podsPerNode)
			for _, kind := range []string{"basic", "unique", "spread", "antiaffinity"} {
				for _, batching := range []bool{true, false} {
					b.Run(fmt.Sprintf("%s/batching=%v", kind, batching), func(b *testing.B) {
						benchPlace(b, c, kind, batching)
					})
				}
			}
		})
	}
}

// benchCache is a cache holding benchCluster's nodes and their pods.
func benchCache(b *testing.B, nodes, podsPerNode int) *cache.Cache {
	c := cache.New()
	for _, ni := range benchCluster(nodes, podsPerNode) {
		c.AddNode(ni.Node())
		for _, pi := range ni.Pods {
			p := *pi.Pod
			p.NodeName = ni.Node().Name
			if err := c.AddPod(&p); err != nil {
				b.Fatal(err)
			}
		}
	}
	return c
}

// benchPlace runs the cycles, then forgets the pods it assumed so that
// every run starts from the same cluster.
func benchPlace(b *testing.B, c *cache.Cache, kind string, batching bool) {
	snap := cache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(snap); err != nil {
		b.Fatal(err)
	}
	fwk, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(snap), runtime.WithParallelism(1))
	if err != nil {
		b.Fatal(err)
	}
	s := New(0, WithRandSeed(1, 2), WithSignatureBatching(batching))
	var assumed []*framework.Pod
	defer func() {
		for _, p := range assumed {
			if err := c.ForgetPod(p); err != nil {
				b.Fatal(err)
			}
		}
	}()
	// Pods of one shape share their PodInfo's spec; each cycle gets its
	// own PodInfo, as each pod of a deployment has.
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := c.UpdateSnapshot(snap); err != nil {
			b.Fatal(err)
		}
		pi := framework.NewPodInfo(benchPod(kind, i))
		res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), pi)
		if err != nil {
			b.Fatal(err)
		}
		pi.Pod.NodeName = res.SuggestedHost
		if err := c.AssumePod(pi); err != nil {
			b.Fatal(err)
		}
		assumed = append(assumed, pi.Pod)
	}
	b.ReportMetric(float64(s.memoHits)/float64(max(len(assumed), 1)), "reused/op")
	b.ReportMetric(float64(s.rankedCycles)/float64(max(len(assumed), 1)), "ranked/op")
}

// BenchmarkExplain is a dry run over all 5,000 nodes.
func BenchmarkExplain(b *testing.B) {
	nodes := benchCluster(5000, 10)
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
