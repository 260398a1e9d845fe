package cache

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// A bulk load numbers its pods as placements one by one, as AddPod would:
// a shard that saw the cache before it learns exactly which landed last.
func TestAddPodInfosRecordsPlacements(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	if err := c.AddPod(pod("before", "a", 1)); err != nil {
		t.Fatal(err)
	}
	const n = recentPlacements + 10
	pis := make([]*framework.PodInfo, n)
	for i := range pis {
		pis[i] = framework.NewPodInfo(pod(fmt.Sprint("p", i), "a", 1))
	}
	seen := c.Placements()
	if err := c.AddPodInfos(pis); err != nil {
		t.Fatal(err)
	}
	if got := c.Placements(); got != seen+n {
		t.Fatalf("Placements = %d after a bulk load of %d onto %d, want %d", got, n, seen, seen+n)
	}
	last, complete := c.PlacedSince(seen + n - 3)
	if !complete || len(last) != 3 || last[0] != pis[n-3] || last[2] != pis[n-1] {
		t.Errorf("PlacedSince(the last three) = %d pods, complete %v; want the last three, in order", len(last), complete)
	}
	if _, complete := c.PlacedSince(seen); complete {
		t.Error("PlacedSince(before the load) says complete, but the load placed more than the log remembers")
	}
	// A pod loaded again on the same node is no new placement.
	if err := c.AddPodInfos(pis[:1]); err != nil {
		t.Fatal(err)
	}
	if got := c.Placements(); got != seen+n {
		t.Errorf("Placements = %d after reloading a pod in place, want %d", got, seen+n)
	}
}

// A restart's load into an empty cache charges the NodeInfos on every core
// (loadLocked); the cache must end exactly as loading the pods one by one
// leaves it: the same pods in the same order on every node, the same sums,
// lists and ports, the same placements, and a recency list that UpdateSnapshot
// can still walk from the newest change down. A load with a pod twice takes
// the serial path, which decides what replacing it does.
func TestParallelLoadMatchesSerialLoad(t *testing.T) {
	const nodes, perNode = 40, 120 // 4,800 pods: over parallelLoadMin
	var pis []*framework.PodInfo
	for i := range nodes * perNode {
		p := pod(fmt.Sprint("p", i), fmt.Sprint("n", i%nodes), int64(10+i%7))
		p.Priority = int32(i % 3)
		switch i % 11 {
		case 3:
			term := framework.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &framework.LabelSelector{}}
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{term}}}
		case 5:
			p.Containers[0].Ports = []framework.ContainerPort{{HostPort: int32(1000 + i), Protocol: "TCP"}}
		case 7:
			p.NodeName = "ghost" // bound to a node the cache has not seen
		}
		pis = append(pis, framework.NewPodInfo(p))
	}
	// The same pods twice, once moved and once in place.
	twice := append(slices.Clip(pis), framework.NewPodInfo(withNode(pod("p1", "", 999), "n2")), framework.NewPodInfo(pod("p8", "n8", 5)))

	for _, tc := range []struct {
		name         string
		pis          []*framework.PodInfo
		wantParallel int
	}{
		{"distinct pods", pis, 1},
		{"a pod twice", twice, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serial, parallel := loadCache(t, nodes, tc.pis, false), loadCache(t, nodes, tc.pis, true)
			if parallel.parallelLoads != tc.wantParallel {
				t.Errorf("loads charged in parallel = %d, want %d", parallel.parallelLoads, tc.wantParallel)
			}
			requireSameCache(t, parallel, serial)
			requireRecencyOrder(t, parallel)
		})
	}
}

// loadCache is a cache of nodes n0..n(nodes-1) loaded with pis in one call
// (parallel) or one pod per call (the serial path).
func loadCache(t *testing.T, nodes int, pis []*framework.PodInfo, parallel bool) *Cache {
	t.Helper()
	c := New()
	for i := range nodes {
		c.AddNode(stdNode(fmt.Sprint("n", i)))
	}
	batches := [][]*framework.PodInfo{pis}
	if !parallel {
		batches = nil
		for _, pi := range pis {
			batches = append(batches, []*framework.PodInfo{pi})
		}
	}
	for _, b := range batches {
		if err := c.AddPodInfos(b); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// requireSameCache compares every NodeInfo but its generation, the pods
// cached and the placements counted.
func requireSameCache(t *testing.T, got, want *Cache) {
	t.Helper()
	if g, w := got.Placements(), want.Placements(); g != w {
		t.Errorf("placements = %d, want %d", g, w)
	}
	if g, w := len(got.pods), len(want.pods); g != w {
		t.Errorf("%d pods cached, want %d", g, w)
	}
	dg, dw := got.Dump(), want.Dump()
	if len(dg.Nodes) != len(dw.Nodes) {
		t.Fatalf("%d NodeInfos, want %d", len(dg.Nodes), len(dw.Nodes))
	}
	for name, w := range dw.Nodes {
		g := dg.Nodes[name]
		if g == nil {
			t.Errorf("NodeInfo %s missing", name)
			continue
		}
		g.Generation, w.Generation = 0, 0
		if !reflect.DeepEqual(g, w) {
			t.Errorf("NodeInfo %s differs: pods %v, want %v", name, podNames(g), podNames(w))
		}
	}
}

// requireRecencyOrder checks that every NodeInfo is on the recency list
// once, newest change first, so that a snapshot taken now sees the next
// change.
func requireRecencyOrder(t *testing.T, c *Cache) {
	t.Helper()
	seen := map[*nodeItem]bool{}
	for it := c.head; it != nil; it = it.next {
		if seen[it] {
			t.Fatal("recency list has a cycle")
		}
		seen[it] = true
		if it.next != nil && it.next.info.Generation >= it.info.Generation {
			t.Fatalf("recency list out of order: generation %d before %d", it.info.Generation, it.next.info.Generation)
		}
	}
	if len(seen) != len(c.nodes) {
		t.Errorf("recency list holds %d NodeInfos, the cache %d", len(seen), len(c.nodes))
	}
	snap := NewEmptySnapshot()
	if err := c.UpdateSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := c.AddPod(pod("late", "n3", 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	ni, err := snap.Get("n3")
	if err != nil {
		t.Fatal(err)
	}
	if names := podNames(ni); names[len(names)-1] != "late" {
		t.Errorf("snapshot after a change on n3 holds %v, want the new pod last", names)
	}
}

func podNames(ni *framework.NodeInfo) []string {
	var out []string
	for _, pi := range ni.Pods {
		out = append(out, pi.Pod.Name)
	}
	return out
}

// A restart's nodes, added in one call, leave the cache as adding them one
// by one does: the same NodeInfos, the same snapshot order, and the recency
// list in order.
func TestAddNodesMatchesAddNode(t *testing.T) {
	var nodes []*framework.Node
	for i := range 30 {
		n := stdNode(fmt.Sprint("n", i))
		n.Labels = map[string]string{framework.LabelTopologyZone: fmt.Sprint("z", i%4)}
		n.Images = []framework.ContainerImage{{Names: []string{fmt.Sprint("img", i%3)}, SizeBytes: 1 << 20}}
		nodes = append(nodes, n)
	}
	nodes = append(nodes, stdNode("n5")) // again, replaced
	for _, known := range []int{0, 3} {  // into an empty cache, and one that knows some
		one, bulk := New(), New()
		for _, n := range nodes {
			one.AddNode(n)
		}
		for _, n := range nodes[:known] {
			bulk.AddNode(n)
		}
		bulk.AddNodes(nodes[known:])
		requireSameCache(t, bulk, one)
		requireRecencyOrder(t, bulk)
		snapOne, snapBulk := NewEmptySnapshot(), NewEmptySnapshot()
		if err := one.UpdateSnapshot(snapOne); err != nil {
			t.Fatal(err)
		}
		if err := bulk.UpdateSnapshot(snapBulk); err != nil {
			t.Fatal(err)
		}
		if got, want := names(snapBulk.List()), names(snapOne.List()); !reflect.DeepEqual(got, want) {
			t.Errorf("%d known: snapshot order after AddNodes %v, after AddNode %v", known, got, want)
		}
	}
}
