package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

func mustUpdate(t testing.TB, c *Cache, s *Snapshot) {
	t.Helper()
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
}

func names(nis []*framework.NodeInfo) []string {
	out := []string{}
	for _, ni := range nis {
		out = append(out, ni.Node().Name)
	}
	return out
}

func TestUpdateSnapshotIsIncremental(t *testing.T) {
	c := New()
	const n = 10
	for i := range n {
		name := fmt.Sprint("n", i)
		c.AddNode(stdNode(name))
		if err := c.AddPod(pod("p"+name, name, 100)); err != nil {
			t.Fatal(err)
		}
	}
	snap := NewEmptySnapshot()
	mustUpdate(t, c, snap)
	if snap.cloned != n || snap.NumNodes() != n {
		t.Fatalf("first update cloned %d, holds %d; want %d", snap.cloned, snap.NumNodes(), n)
	}

	// Remember what the snapshot holds now.
	infos := map[string]*framework.NodeInfo{}
	podArrays := map[string]**framework.PodInfo{}
	for _, ni := range snap.List() {
		infos[ni.Node().Name] = ni
		podArrays[ni.Node().Name] = &ni.Pods[0]
	}
	list := snap.List()

	// The cache changes after the snapshot: the snapshot must not see it.
	if err := c.AssumePod(framework.NewPodInfo(pod("new", "n3", 300))); err != nil {
		t.Fatal(err)
	}
	if got, _ := snap.Get("n3"); got.Requested.MilliCPU != 100 {
		t.Fatalf("snapshot saw a cache change before UpdateSnapshot: cpu %d", got.Requested.MilliCPU)
	}

	snap.cloned = 0
	mustUpdate(t, c, snap)
	if snap.cloned != 1 {
		t.Errorf("one node changed, %d cloned", snap.cloned)
	}
	if &snap.List()[0] != &list[0] {
		t.Error("node list rebuilt although no node joined or left")
	}
	for _, ni := range snap.List() {
		name := ni.Node().Name
		if ni != infos[name] {
			t.Errorf("%s: NodeInfo pointer changed", name)
		}
		unchanged := &ni.Pods[0] == podArrays[name]
		if name == "n3" {
			if unchanged || len(ni.Pods) != 2 || ni.Requested.MilliCPU != 400 {
				t.Errorf("n3 not refreshed: %d pods, cpu %d", len(ni.Pods), ni.Requested.MilliCPU)
			}
		} else if !unchanged {
			t.Errorf("%s was copied although it did not change", name)
		}
	}

	snap.cloned = 0
	mustUpdate(t, c, snap)
	if snap.cloned != 0 {
		t.Errorf("nothing changed, %d cloned", snap.cloned)
	}
	if snap.Generation() != c.head.info.Generation {
		t.Errorf("snapshot generation %d, newest cache change %d", snap.Generation(), c.head.info.Generation)
	}
}

func TestUpdateSnapshotLists(t *testing.T) {
	affinity := func(p *framework.Pod, required bool) *framework.Pod {
		term := framework.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &framework.LabelSelector{}}
		if required {
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{term}}}
		} else {
			p.Affinity = &framework.Affinity{PodAffinity: &framework.PodAffinity{Preferred: []framework.WeightedPodAffinityTerm{{Weight: 1, Term: term}}}}
		}
		return p
	}
	type lists struct{ All, Affinity, AntiAffinity []string }
	read := func(s *Snapshot) lists {
		return lists{names(s.List()), names(s.HavePodsWithAffinityList()), names(s.HavePodsWithRequiredAntiAffinityList())}
	}

	c := New()
	snap := NewEmptySnapshot()
	soft := affinity(pod("soft", "b", 0), false)
	hard := affinity(pod("hard", "c", 0), true)
	steps := []struct {
		name string
		do   func(t *testing.T)
		want lists
	}{
		{"add nodes", func(t *testing.T) {
			for _, n := range []string{"a", "b", "c"} {
				c.AddNode(stdNode(n))
			}
		}, lists{All: []string{"a", "b", "c"}, Affinity: []string{}, AntiAffinity: []string{}}},
		{"pod with affinity", func(t *testing.T) { must(t, c.AddPod(soft)) },
			lists{All: []string{"a", "b", "c"}, Affinity: []string{"b"}, AntiAffinity: []string{}}},
		{"assumed pod with required anti-affinity", func(t *testing.T) { must(t, c.AssumePod(framework.NewPodInfo(hard))) },
			lists{All: []string{"a", "b", "c"}, Affinity: []string{"b", "c"}, AntiAffinity: []string{"c"}}},
		{"forget it", func(t *testing.T) { must(t, c.ForgetPod(hard)) },
			lists{All: []string{"a", "b", "c"}, Affinity: []string{"b"}, AntiAffinity: []string{}}},
		{"remove node with affinity pod", func(t *testing.T) { c.RemoveNode("b") },
			lists{All: []string{"a", "c"}, Affinity: []string{}, AntiAffinity: []string{}}},
		{"node joins", func(t *testing.T) { c.AddNode(stdNode("d")) },
			lists{All: []string{"a", "c", "d"}, Affinity: []string{}, AntiAffinity: []string{}}},
		{"node leaves and another joins between updates", func(t *testing.T) {
			c.RemoveNode("a")
			c.AddNode(stdNode("e"))
		}, lists{All: []string{"c", "d", "e"}, Affinity: []string{}, AntiAffinity: []string{}}},
	}
	for _, st := range steps {
		st.do(t)
		mustUpdate(t, c, snap)
		if diff := cmp.Diff(st.want, read(snap)); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", st.name, diff)
		}
		// A fresh snapshot must agree with the incremental one.
		fresh := NewEmptySnapshot()
		mustUpdate(t, c, fresh)
		if diff := cmp.Diff(read(fresh), read(snap)); diff != "" {
			t.Errorf("%s: incremental differs from fresh (-fresh,+incremental):\n%s", st.name, diff)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestListInterleavesZones(t *testing.T) {
	zoned := func(name, zone string) *framework.Node {
		n := stdNode(name)
		n.Labels = map[string]string{labelZone: zone, labelRegion: "r"}
		return n
	}
	c := New()
	for _, n := range []*framework.Node{
		zoned("a1", "z1"), zoned("a2", "z1"), zoned("b1", "z2"), zoned("c1", "z3"), zoned("b2", "z2"), zoned("a3", "z1"),
	} {
		c.AddNode(n)
	}
	snap := NewEmptySnapshot()
	mustUpdate(t, c, snap)
	if diff := cmp.Diff([]string{"a1", "b1", "c1", "a2", "b2", "a3"}, names(snap.List())); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}

	// b1 moves to z3; c1's zone keeps its place; the old beta label counts.
	c.AddNode(zoned("b1", "z3"))
	beta := stdNode("d1")
	beta.Labels = map[string]string{labelZoneBeta: "z2", labelRegionBeta: "r"}
	c.AddNode(beta)
	mustUpdate(t, c, snap)
	if diff := cmp.Diff([]string{"a1", "b2", "c1", "a2", "d1", "b1", "a3"}, names(snap.List())); diff != "" {
		t.Errorf("order after re-zoning (-want,+got):\n%s", diff)
	}
}

func TestNewSnapshot(t *testing.T) {
	nodes := []*framework.Node{stdNode("b"), stdNode("a")}
	pods := []*framework.Pod{
		pod("p1", "a", 100), pod("p2", "a", 200), pod("p3", "b", 300),
		pod("orphan", "zz", 1), withPhase(pod("done", "a", 1000), framework.PodSucceeded),
	}
	s := NewSnapshot(pods, nodes)
	if diff := cmp.Diff([]string{"b", "a"}, names(s.NodeInfos().List())); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
	a, err := s.Get("a")
	if err != nil || a.Requested.MilliCPU != 300 || len(a.Pods) != 2 {
		t.Errorf("a = %+v, %v; want p1 and p2 charged", a, err)
	}
}

// TestIncrementalMatchesFresh runs a seeded random mix of operations and
// checks after each that the incrementally updated snapshot equals a fresh
// one, and that the recency list stays ordered by generation.
func TestIncrementalMatchesFresh(t *testing.T) {
	type view struct {
		Nodes                  []string
		Affinity, AntiAffinity []string
		CPU                    map[string]int64
		Pods                   map[string]int
	}
	read := func(s *Snapshot) view {
		v := view{Nodes: names(s.List()), Affinity: names(s.HavePodsWithAffinityList()),
			AntiAffinity: names(s.HavePodsWithRequiredAntiAffinityList()), CPU: map[string]int64{}, Pods: map[string]int{}}
		for _, ni := range s.List() {
			v.CPU[ni.Node().Name] = ni.Requested.MilliCPU
			v.Pods[ni.Node().Name] = len(ni.Pods)
		}
		return v
	}
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runRandomOps(t, rand.New(rand.NewPCG(seed, 2)), read)
		})
	}
}

func runRandomOps[V any](t *testing.T, rng *rand.Rand, read func(*Snapshot) V) {
	c := New()
	snap := NewEmptySnapshot()
	for step := range 2000 {
		nodeName := fmt.Sprint("n", rng.IntN(8))
		p := pod(fmt.Sprint("p", rng.IntN(30)), nodeName, int64(rng.IntN(5)*100))
		if rng.IntN(4) == 0 {
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{
				Required: []framework.PodAffinityTerm{{TopologyKey: "zone", LabelSelector: &framework.LabelSelector{}}}}}
		}
		switch rng.IntN(7) {
		case 0:
			c.AddNode(stdNode(nodeName))
		case 1:
			c.RemoveNode(nodeName)
		case 2:
			_ = c.AddPod(p)
		case 3:
			_ = c.AssumePod(framework.NewPodInfo(p))
		case 4:
			if cached, ok := c.GetPod(p.Key()); ok {
				_ = c.ForgetPod(cached)
			}
		case 5:
			_ = c.RemovePod(p)
		case 6:
			mustUpdate(t, c, snap)
			fresh := NewEmptySnapshot()
			mustUpdate(t, c, fresh)
			if diff := cmp.Diff(read(fresh), read(snap)); diff != "" {
				t.Fatalf("step %d: incremental differs from fresh (-fresh,+incremental):\n%s", step, diff)
			}
		}
		for it := c.head; it != nil && it.next != nil; it = it.next {
			if it.info.Generation <= it.next.info.Generation {
				t.Fatalf("step %d: recency list out of order", step)
			}
		}
	}
}

// The filter pass relies on the snapshot's NodeInfos sitting in one array
// in list order, so the prefetcher can run ahead of it.
func TestUpdateSnapshotLaysNodesOutInListOrder(t *testing.T) {
	c := New()
	snap := NewEmptySnapshot()
	contiguous := func(when string) {
		t.Helper()
		list := snap.List()
		for i := 1; i < len(list); i++ {
			if gap := uintptr(unsafe.Pointer(list[i])) - uintptr(unsafe.Pointer(list[i-1])); gap != unsafe.Sizeof(*list[0]) {
				t.Fatalf("%s: nodes %d and %d are %d bytes apart, want %d", when, i-1, i, gap, unsafe.Sizeof(*list[0]))
			}
			if got, _ := snap.Get(list[i].Node().Name); got != list[i] {
				t.Fatalf("%s: Get(%s) is not the listed NodeInfo", when, list[i].Node().Name)
			}
		}
	}
	for i := range 6 {
		c.AddNode(stdNode(fmt.Sprint("n", i)))
	}
	mustUpdate(t, c, snap)
	contiguous("after the first update")

	must(t, c.AddPod(pod("p", "n2", 100)))
	mustUpdate(t, c, snap)
	contiguous("after a pod landed")
	if got, _ := snap.Get("n2"); got.Requested.MilliCPU != 100 {
		t.Fatalf("n2 cpu %d after the update, want 100", got.Requested.MilliCPU)
	}

	c.AddNode(stdNode("n6"))
	c.RemoveNode("n0")
	mustUpdate(t, c, snap)
	contiguous("after a node joined and one left")
	if got, _ := snap.Get("n2"); got.Requested.MilliCPU != 100 || len(got.Pods) != 1 {
		t.Fatalf("n2 lost its pod when moved: cpu %d, %d pods", got.Requested.MilliCPU, len(got.Pods))
	}
}
