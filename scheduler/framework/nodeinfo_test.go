package framework

import "testing"

func TestFreedBelow(t *testing.T) {
	pod := func(name string, prio int32, cpu, mem int64) *PodInfo {
		return NewPodInfo(&Pod{Name: name, Namespace: "ns", Priority: prio,
			Containers: []Container{{Requests: ResourceList{ResourceCPU: cpu, ResourceMemory: mem}}}})
	}
	n := NewNodeInfo(pod("a", 1, 100, 10), pod("b", 5, 200, 20), pod("c", 1, 300, 30), pod("d", 9, 400, 40))
	tests := []struct {
		prio int32
		want Freed
	}{
		{prio: 1, want: Freed{}},
		{prio: 2, want: Freed{Pods: 2, MilliCPU: 400, Memory: 40}},
		{prio: 5, want: Freed{Pods: 2, MilliCPU: 400, Memory: 40}},
		{prio: 6, want: Freed{Pods: 3, MilliCPU: 600, Memory: 60}},
		{prio: 100, want: Freed{Pods: 4, MilliCPU: 1000, Memory: 100}},
	}
	for _, tt := range tests {
		if got := n.FreedBelow(tt.prio); got != tt.want {
			t.Errorf("FreedBelow(%d) = %+v, want %+v", tt.prio, got, tt.want)
		}
	}

	// A clone shares the totals; changing either leaves the other alone.
	c := n.Clone()
	if err := c.RemovePod(&Pod{Name: "a", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	c.AddPodInfo(pod("e", 5, 1000, 0))
	if got, want := c.FreedBelow(6), (Freed{Pods: 3, MilliCPU: 1500, Memory: 50}); got != want {
		t.Errorf("clone: FreedBelow(6) = %+v, want %+v", got, want)
	}
	if got, want := n.FreedBelow(6), (Freed{Pods: 3, MilliCPU: 600, Memory: 60}); got != want {
		t.Errorf("original after the clone changed: FreedBelow(6) = %+v, want %+v", got, want)
	}
	// The last pod of a priority takes its total with it.
	if err := c.RemovePod(&Pod{Name: "c", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if got := c.FreedBelow(2); got != (Freed{}) {
		t.Errorf("no pod below 2 left, yet FreedBelow(2) = %+v", got)
	}

	// KeepAtOrAbove is for a copy whose lower pods were taken out directly.
	k := *n
	k.KeepAtOrAbove(5)
	if got, want := k.FreedBelow(6), (Freed{Pods: 1, MilliCPU: 200, Memory: 20}); got != want {
		t.Errorf("after KeepAtOrAbove(5): FreedBelow(6) = %+v, want %+v", got, want)
	}
	k.AddPodInfo(pod("f", 1, 7, 7))
	if got, want := n.FreedBelow(2), (Freed{Pods: 2, MilliCPU: 400, Memory: 40}); got != want {
		t.Errorf("adding to the copy changed the original: FreedBelow(2) = %+v, want %+v", got, want)
	}
}

// A clone of a node without images has no ImageStates map at all, so a
// lookup reads nothing of it; one with images gets its own copies.
func TestCloneImageStates(t *testing.T) {
	bare := NewNodeInfo()
	if c := bare.Clone(); c.ImageStates != nil {
		t.Errorf("clone of a node without images has ImageStates %v, want nil", c.ImageStates)
	}
	withImage := NewNodeInfo()
	withImage.ImageStates["app:1"] = &ImageStateSummary{Size: 10, NumNodes: 2}
	c := withImage.Clone()
	c.ImageStates["app:1"].NumNodes = 3
	if got := withImage.ImageStates["app:1"].NumNodes; got != 2 {
		t.Errorf("changing the clone's image state changed the original: NumNodes %d, want 2", got)
	}
}

// Label answers as the node's label map does, for the well-known keys
// from the copies SetNode made, and follows the node when it is set again.
func TestLabel(t *testing.T) {
	labels := map[string]string{LabelHostname: "h1", LabelTopologyZone: "z1", "rack": "r1"}
	n := NewNodeInfo()
	n.SetNode(&Node{Name: "n1", Labels: labels})
	keys := []string{LabelHostname, LabelTopologyZone, LabelTopologyRegion, "rack", "missing", ""}
	check := func(n *NodeInfo, labels map[string]string, when string) {
		t.Helper()
		for _, key := range keys {
			wantV, wantOK := labels[key]
			if v, ok := n.Label(NewLabelKey(key)); v != wantV || ok != wantOK {
				t.Errorf("%s: Label(%q) = %q, %v; want %q, %v", when, key, v, ok, wantV, wantOK)
			}
		}
	}
	check(n, labels, "set")
	check(n.Clone(), labels, "clone")
	moved := map[string]string{LabelTopologyRegion: "r9", "rack": "r2"}
	n.SetNode(&Node{Name: "n1", Labels: moved})
	check(n, moved, "set again")
}
