package cache

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

// TestNodesChangedSince checks the snapshot's change log against the
// NodeInfos' own generations: every node changed after a generation the
// snapshot reported is listed, while the log reaches back to it; a
// rebuilt node list or a trimmed log says it cannot tell.
func TestNodesChangedSince(t *testing.T) {
	c := New()
	snap := NewEmptySnapshot()
	update := func() int64 {
		t.Helper()
		if err := c.UpdateSnapshot(snap); err != nil {
			t.Fatal(err)
		}
		return snap.Generation()
	}
	for i := range 10 {
		c.AddNode(fwtest.Node(fmt.Sprint("n", i), 1000, 1<<30, 1000))
	}
	g0 := update()
	if _, ok := snap.NodesChangedSince(g0 - 1); ok {
		t.Error("the log answers for a generation before the list was built")
	}
	if changed, ok := snap.NodesChangedSince(g0); !ok || len(changed) != 0 {
		t.Errorf("nothing changed: got %d, ok %v", len(changed), ok)
	}

	// checkSince compares the log with the generations.
	checkSince := func(gen int64) {
		t.Helper()
		changed, ok := snap.NodesChangedSince(gen)
		if !ok {
			t.Fatalf("log cannot tell since %d", gen)
		}
		listed := map[*framework.NodeInfo]bool{}
		for _, ni := range changed {
			listed[ni] = true
		}
		for _, ni := range snap.List() {
			if (ni.Generation > gen) != listed[ni] {
				t.Errorf("%s at generation %d: listed %v since %d", ni.Node().Name, ni.Generation, listed[ni], gen)
			}
		}
	}
	addPod := func(i int) {
		p := fwtest.Pod(fmt.Sprint("p", i), fwtest.Resources(1, 1))
		p.NodeName = fmt.Sprint("n", i%10)
		if err := c.AddPod(p); err != nil {
			t.Fatal(err)
		}
	}
	addPod(0)
	addPod(3)
	g1 := update()
	addPod(13)
	addPod(5)
	update()
	checkSince(g0)
	checkSince(g1)

	c.AddNode(fwtest.Node("n10", 1000, 1<<30, 1000))
	g2 := update()
	if _, ok := snap.NodesChangedSince(g1); ok {
		t.Error("the log answers across a node list rebuild")
	}
	checkSince(g2)

	// Overflow: the oldest generations fall out of reach, recent ones stay.
	for i := range maxChangeLog + 10 {
		addPod(100 + i)
		update()
	}
	if _, ok := snap.NodesChangedSince(g2); ok {
		t.Error("the log answers beyond its bound")
	}
	g3 := update()
	addPod(99999)
	update()
	checkSince(g3)
}

// Trimming the log lets go of the NodeInfos it drops. A first update of
// more nodes than the log keeps records every NodeInfo and then rebuilds
// the list, copying them all; the log must not keep the originals alive
// behind its length, where nothing reads them again.
func TestChangeLogTrimLetsDroppedNodeInfosGo(t *testing.T) {
	c := New()
	snap := NewEmptySnapshot()
	for i := range 2*maxChangeLog + 10 {
		c.AddNode(fwtest.Node(fmt.Sprint("n", i), 1000, 1<<30, 1000))
	}
	if err := c.UpdateSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	nodes := snap.changes.nodes
	held := 0
	for _, ni := range nodes[len(nodes):cap(nodes)] {
		if ni != nil {
			held++
		}
	}
	if held > 0 {
		t.Errorf("the log holds %d NodeInfos past its length of %d", held, len(nodes))
	}
}
