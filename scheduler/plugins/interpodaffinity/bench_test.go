package interpodaffinity

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
)

const benchNodes = 5000

// benchCluster is benchNodes nodes (host, kubernetes.io/hostname and one
// of 10 zones), each running one pod built by existing.
func benchCluster(existing func(i int) *framework.Pod) (*cache.Snapshot, []*framework.NodeInfo) {
	nodes := make([]*framework.Node, benchNodes)
	pods := make([]*framework.Pod, benchNodes)
	for i := range benchNodes {
		name := fmt.Sprintf("node-%d", i)
		nodes[i] = node(name, "host", name, framework.LabelHostname, name, "zone", fmt.Sprintf("zone-%d", i%10))
		pods[i] = existing(i)
		pods[i].NodeName = name
	}
	snap := cache.NewSnapshot(pods, nodes)
	return snap, snap.NodeInfos().List()
}

// BenchmarkPreFilterFilterRequiredAntiAffinity: a pod with required
// anti-affinity by host against 5,000 nodes each running a pod with the
// same anti-affinity; one op is PreFilter plus Filter on every node. The
// host is a label of Berth's own (host) or the well-known one, which
// NodeInfo keeps beside the node's labels.
func BenchmarkPreFilterFilterRequiredAntiAffinity(b *testing.B) {
	for _, key := range []string{"host", framework.LabelHostname} {
		b.Run("key="+key, func(b *testing.B) {
			term := termIn("app", key, "web")
			snap, nodes := benchCluster(func(i int) *framework.Pod {
				return pod(fmt.Sprintf("web-%d", i)).labels("app", "web").requiredAnti(term).obj()
			})
			pl := newPluginOver(b, nil, 1, snap)
			pi := framework.NewPodInfo(pod("incoming").labels("app", "web").requiredAnti(term).obj())
			b.ReportAllocs()
			for b.Loop() {
				state := framework.NewCycleState()
				if _, st := pl.PreFilter(ctx, state, pi, nodes); !st.IsSuccess() {
					b.Fatal(st)
				}
				for _, ni := range nodes {
					if st := pl.Filter(ctx, state, pi, ni); st.IsSuccess() {
						b.Fatal("a node with a repelling pod passed")
					}
				}
			}
		})
	}
}

// BenchmarkFilterRequiredAntiAffinity is the Filter part alone, per node.
func BenchmarkFilterRequiredAntiAffinity(b *testing.B) {
	term := termIn("app", "host", "web")
	snap, nodes := benchCluster(func(i int) *framework.Pod {
		return pod(fmt.Sprintf("web-%d", i)).labels("app", "web").requiredAnti(term).obj()
	})
	pl := newPluginOver(b, nil, 1, snap)
	pi := framework.NewPodInfo(pod("incoming").labels("app", "other").requiredAnti(term).obj())
	state := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, state, pi, nodes); !st.IsSuccess() {
		b.Fatal(st)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pl.Filter(ctx, state, pi, nodes[i%len(nodes)])
		i++
	}
}

// BenchmarkPreFilterNoAffinity: the common case, no pod anywhere has
// affinity; PreFilter must skip without touching the nodes.
func BenchmarkPreFilterNoAffinity(b *testing.B) {
	snap, nodes := benchCluster(func(i int) *framework.Pod { return pod(fmt.Sprintf("p-%d", i)).labels("app", "web").obj() })
	pl := newPluginOver(b, nil, 1, snap)
	pi := framework.NewPodInfo(pod("incoming").labels("app", "web").obj())
	b.ReportAllocs()
	for b.Loop() {
		if _, st := pl.PreFilter(ctx, framework.NewCycleState(), pi, nodes); !st.IsSkip() {
			b.Fatal(st)
		}
		if st := pl.PreScore(ctx, framework.NewCycleState(), pi, nodes); !st.IsSkip() {
			b.Fatal(st)
		}
	}
}

// BenchmarkPreScoreScorePreferred: a pod with preferred affinity by zone
// and anti-affinity by host against 5,000 nodes; one op is PreScore, Score
// on every node and NormalizeScore.
func BenchmarkPreScoreScorePreferred(b *testing.B) {
	snap, nodes := benchCluster(func(i int) *framework.Pod {
		return pod(fmt.Sprintf("web-%d", i)).labels("app", "web").obj()
	})
	pl := newPluginOver(b, nil, 1, snap)
	pi := framework.NewPodInfo(pod("incoming").labels("app", "web").
		preferredAffinity(10, termIn("app", "zone", "web")).preferredAnti(50, termIn("app", "host", "web")).obj())
	scores := make(framework.NodeScoreList, len(nodes))
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		if st := pl.PreScore(ctx, state, pi, nodes); !st.IsSuccess() {
			b.Fatal(st)
		}
		for i, ni := range nodes {
			s, _ := pl.Score(ctx, state, pi, ni)
			scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
		}
		pl.NormalizeScore(ctx, state, pi, scores)
	}
}

// BenchmarkPreFilterInterleaved: pods of six workloads with required
// anti-affinity by hostname take turns (more label sets than the plugin
// keeps results for) against 5,000 nodes each running a pod that repels
// them all; one op is one PreFilter.
func BenchmarkPreFilterInterleaved(b *testing.B) {
	snap, nodes := benchCluster(func(i int) *framework.Pod {
		return pod(fmt.Sprintf("web-%d", i)).labels("app", "web").requiredAnti(termExists("app", framework.LabelHostname)).obj()
	})
	pl := newPluginOver(b, nil, 1, snap)
	var incoming []*framework.PodInfo
	for w := range 6 {
		incoming = append(incoming, framework.NewPodInfo(pod(fmt.Sprint("w", w)).labels("app", fmt.Sprint("w", w)).
			requiredAnti(termIn("app", framework.LabelHostname, fmt.Sprint("w", w))).obj()))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, st := pl.PreFilter(ctx, framework.NewCycleState(), incoming[i%len(incoming)], nodes); !st.IsSuccess() {
			b.Fatal(st)
		}
		i++
	}
}
