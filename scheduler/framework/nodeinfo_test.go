package framework

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

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

// Nodes of one zone share its value's bytes, however their labels were
// decoded and whenever they were set: spreading finds a node's domain by
// that address.
func TestLabelSharesZoneValues(t *testing.T) {
	node := func(name string) *NodeInfo {
		// strings.Clone: each node's labels own their bytes, as decoded ones do.
		n := NewNodeInfo()
		n.SetNode(&Node{Name: name, Labels: map[string]string{
			LabelHostname:       strings.Clone(name),
			LabelTopologyZone:   strings.Clone("zone-a"),
			LabelTopologyRegion: strings.Clone("region-1"),
		}})
		return n
	}
	a := node("n1")
	runtime.GC() // unique drops a canonical copy nothing holds a handle to
	runtime.GC()
	b := node("n2")
	for _, key := range []string{LabelTopologyZone, LabelTopologyRegion} {
		va, _ := a.Label(NewLabelKey(key))
		vb, _ := b.Label(NewLabelKey(key))
		if va != vb || unsafe.StringData(va) != unsafe.StringData(vb) {
			t.Errorf("Label(%q) of two nodes: %q at %p and %q at %p; want one shared value",
				key, va, unsafe.StringData(va), vb, unsafe.StringData(vb))
		}
	}
}

// A confirmation that charges what its assumption did takes its place;
// one that charges otherwise is refused, leaving the node as it was.
func TestReplacePodInfo(t *testing.T) {
	pod := func(name string, cpu int64, antiAffinity bool) *PodInfo {
		p := &Pod{Name: name, Namespace: "ns", Containers: []Container{{Requests: ResourceList{ResourceCPU: cpu}}}}
		if antiAffinity {
			p.Affinity = &Affinity{PodAntiAffinity: &PodAntiAffinity{Required: []PodAffinityTerm{{TopologyKey: "zone"}}}}
		}
		return NewPodInfo(p)
	}
	assumed := pod("b", 200, true)
	n := NewNodeInfo(pod("a", 100, false), assumed, pod("c", 300, false))
	requested, gen := n.Requested, n.Generation

	confirmed := pod("b", 200, true)
	if !n.ReplacePodInfo(confirmed) {
		t.Fatal("ReplacePodInfo of the same charge = false, want true")
	}
	if n.Pods[1] != confirmed || n.PodsWithAffinity[0] != confirmed || n.PodsWithRequiredAntiAffinity[0] != confirmed {
		t.Errorf("the confirmed PodInfo is not where the assumed one was: pods %v", n.Pods)
	}
	if n.Requested.MilliCPU != requested.MilliCPU || n.Generation <= gen {
		t.Errorf("after the swap: requested %d (was %d), generation %d (was %d); want the same sum and a newer generation",
			n.Requested.MilliCPU, requested.MilliCPU, n.Generation, gen)
	}

	gen = n.Generation
	for _, other := range []*PodInfo{pod("b", 250, true), pod("b", 200, false), pod("x", 200, true)} {
		if n.ReplacePodInfo(other) {
			t.Errorf("ReplacePodInfo(%s, %dm) = true, want false", other.Pod.Name, other.Requests.MilliCPU)
		}
	}
	if n.Pods[1] != confirmed || n.Generation != gen || n.FreedBelow(1).MilliCPU != 600 {
		t.Errorf("a refused replacement changed the node: pods %v, generation %d (was %d)", n.Pods, n.Generation, gen)
	}
}

// WithPod names every PodInfo field it copies; a new field must be added
// there (or left out on purpose) and then listed here.
func TestWithPodKeepsEveryField(t *testing.T) {
	known := map[string]bool{
		"Pod": true, "Requests": true, "NonZeroRequests": true, "priority": true, "hostPorts": true,
		"affinity": true, "requiredAntiAffinity": true, "startNsec": true, "startSec": true, "class": true, "sig": true,
	}
	typ := reflect.TypeFor[PodInfo]()
	for i := range typ.NumField() {
		if !known[typ.Field(i).Name] {
			t.Errorf("PodInfo.%s is new: copy it in WithPod, then list it here", typ.Field(i).Name)
		}
	}

	p := &Pod{Name: "a", Namespace: "ns", Priority: 7, Labels: map[string]string{"app": "web"},
		StartTime:  time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Containers: []Container{{Requests: ResourceList{ResourceCPU: 100}, Ports: []ContainerPort{{HostPort: 80}}}},
		Affinity: &Affinity{PodAntiAffinity: &PodAntiAffinity{Required: []PodAffinityTerm{{TopologyKey: LabelHostname,
			LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}
	pi := NewPodInfo(p)
	class := pi.AffinityClass()
	pi.sig = &podSignature{}
	moved := *p
	moved.NodeName = "n1"
	c := pi.WithPod(&moved)
	if c.Pod != &moved || !reflect.DeepEqual(c.Requests, pi.Requests) || !reflect.DeepEqual(c.NonZeroRequests, pi.NonZeroRequests) ||
		c.Priority() != 7 || !c.UsesHostPorts() || c.affinity != pi.affinity || !c.requiredAntiAffinity ||
		!c.StartTime().Equal(p.StartTime) || c.sig != pi.sig {
		t.Errorf("WithPod lost a field: %+v from %+v", c, pi)
	}
	if got := c.class.Load(); got != class {
		t.Errorf("WithPod's class = %d, want %d carried", got, class)
	}
}
