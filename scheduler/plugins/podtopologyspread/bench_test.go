package podtopologyspread

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
)

// benchCluster is 5,000 nodes in 10 zones with podsPerNode pods on each,
// spread over 20 apps. All pods of app-0 sit in zone-0, which its hard
// constraint therefore rejects.
func benchCluster(podsPerNode int) []*framework.NodeInfo {
	const numNodes, apps = 5000, 20
	nodes := make([]*framework.Node, numNodes)
	var pods []*framework.Pod
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		nodes[i] = mkNode(name).label(LabelHostname, name).label(LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).obj()
		for j := range podsPerNode {
			k := i*podsPerNode + j
			pods = append(pods, mkPod(fmt.Sprintf("pod-%05d", k)).node(name).label("app", fmt.Sprintf("app-%d", k%apps)).label("team", "t").obj())
		}
	}
	return place(nodes, pods)
}

// BenchmarkFilterScore runs one pod's whole PodTopologySpread work over
// 5,000 nodes: PreFilter, Filter on every node, PreScore, Score on every
// node that passed and NormalizeScore; with 10,000 and 50,000 existing
// pods, and with the count memos on and off.
func BenchmarkFilterScore(b *testing.B) {
	for _, podsPerNode := range []int{2, 10} {
		infos := benchCluster(podsPerNode)
		b.Run(fmt.Sprintf("pods=%d", len(infos)*podsPerNode), func(b *testing.B) { benchFilterScore(b, infos) })
	}
}

func benchFilterScore(b *testing.B, infos []*framework.NodeInfo) {
	cases := []struct {
		name string
		args any
		pod  *framework.Pod
	}{
		{
			name: "hard zone and soft hostname",
			args: listArgs,
			pod: mkPod("p").label("app", "app-0").
				spread(1, LabelTopologyZone, hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": "app-0"}}).
				spread(1, LabelHostname, soft, &framework.LabelSelector{MatchLabels: map[string]string{"app": "app-0"}}).obj(),
		},
		{
			// System defaulting is opt-in (see argsFrom): nil args would
			// measure a plugin with no constraints at all.
			name: "system defaults",
			args: &Args{DefaultingType: SystemDefaulting},
			pod:  mkPod("p").label("app", "app-0").label("team", "t").obj(),
		},
	}
	for _, par := range []int{1, 2} {
		for _, c := range cases {
			for _, memo := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/parallelism=%d/memo=%v", c.name, par, memo), func(b *testing.B) {
					pl, _ := newPlugin(b, c.args, infos...)
					pl.parallelizer = framework.NewParallelizer(par)
					if !memo {
						// A held lock makes every cycle count without memos.
						pl.memos.mu.Lock()
					}
					pod := framework.NewPodInfo(c.pod)
					feasible := make([]*framework.NodeInfo, 0, len(infos))
					scores := make(framework.NodeScoreList, 0, len(infos))
					b.ReportAllocs()
					for b.Loop() {
						state := framework.NewCycleState()
						_, st := pl.PreFilter(ctx, state, pod, infos)
						feasible = feasible[:0]
						if st.IsSkip() {
							feasible = append(feasible, infos...)
						} else {
							for _, ni := range infos {
								if pl.Filter(ctx, state, pod, ni).IsSuccess() {
									feasible = append(feasible, ni)
								}
							}
						}
						if st := pl.PreScore(ctx, state, pod, feasible); !st.IsSuccess() {
							b.Fatalf("code %v: %v", st.Code(), st)
						}
						scores = scores[:0]
						for _, ni := range feasible {
							s, _ := pl.Score(ctx, state, pod, ni)
							scores = append(scores, framework.NodeScore{Name: ni.Node().Name, Score: s})
						}
						if st := pl.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
							b.Fatal(st)
						}
					}
				})
			}
		}
	}
}

// BenchmarkPreFilterInterleaved: pods of twelve workloads, each spread
// hard over zones by its own selector, take turns (more counting rules
// than the plugin keeps) against 5,000 nodes with 10,000 pods; one op is
// one PreFilter. index=false holds the kept totals' lock, as a concurrent
// cycle would, so every cycle counts without them.
func BenchmarkPreFilterInterleaved(b *testing.B) {
	const apps = 12
	c := cache.New()
	for i := range 5000 {
		name := fmt.Sprintf("node-%04d", i)
		c.AddNode(mkNode(name).label(LabelHostname, name).label(LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).obj())
		for j := range 2 {
			k := 2*i + j
			if err := c.AddPod(mkPod(fmt.Sprintf("pod-%05d", k)).node(name).label("app", fmt.Sprintf("app-%d", k%apps)).obj()); err != nil {
				b.Fatal(err)
			}
		}
	}
	snap := cache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(snap); err != nil {
		b.Fatal(err)
	}
	var incoming []*framework.PodInfo
	for a := range apps {
		app := fmt.Sprintf("app-%d", a)
		incoming = append(incoming, framework.NewPodInfo(mkPod("p-"+app).label("app", app).
			spread(1, LabelTopologyZone, hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": app}}).obj()))
	}
	infos := snap.List()
	for _, index := range []bool{true, false} {
		b.Run(fmt.Sprintf("index=%v", index), func(b *testing.B) {
			pl, _ := newPluginOn(b, listArgs, snap)
			if !index {
				pl.counts.mu.Lock()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, st := pl.PreFilter(ctx, framework.NewCycleState(), incoming[i%apps], infos); !st.IsSuccess() {
					b.Fatal(st)
				}
				i++
			}
		})
	}
}

// BenchmarkPreFilterKept: one workload spread hard over zones or over
// hostnames (a domain per node), 5,000 nodes with 10,000 pods, the kept
// totals in use; one op is one PreFilter and one copy of its state, as a
// re-check before an assumption makes.
func BenchmarkPreFilterKept(b *testing.B) {
	c := cache.New()
	for i := range 5000 {
		name := fmt.Sprintf("node-%04d", i)
		c.AddNode(mkNode(name).label(LabelHostname, name).label(LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).obj())
		for j := range 2 {
			if err := c.AddPod(mkPod(fmt.Sprintf("pod-%05d", 2*i+j)).node(name).label("app", "web").obj()); err != nil {
				b.Fatal(err)
			}
		}
	}
	snap := cache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(snap); err != nil {
		b.Fatal(err)
	}
	infos := snap.List()
	for _, key := range []string{LabelTopologyZone, LabelHostname} {
		b.Run("key="+key, func(b *testing.B) {
			pl, _ := newPluginOn(b, listArgs, snap)
			pod := framework.NewPodInfo(mkPod("p").label("app", "web").
				spread(1, key, hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}}).obj())
			b.ReportAllocs()
			for b.Loop() {
				state := framework.NewCycleState()
				if _, st := pl.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
					b.Fatal(st)
				}
				state.Clone()
			}
		})
	}
}
