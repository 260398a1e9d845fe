package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

func nominatedKeys(n *nominator, node string) []string {
	var keys []string
	for _, pi := range n.NominatedPodsForNode(node) {
		keys = append(keys, pi.Pod.Key())
	}
	return keys
}

// The nominator hands filters its own lists: they come in key order, and
// a list handed out never changes afterwards.
func TestNominatorListsAreOrderedAndNeverChanged(t *testing.T) {
	n := newNominator()
	pi := func(name string) *framework.PodInfo { return framework.NewPodInfo(cpuPod(name, 100, 100, "")) }
	for _, name := range []string{"c", "a", "b"} {
		n.set(pi(name), "n1")
	}
	before := n.NominatedPodsForNode("n1")
	if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/c"}, nominatedKeys(n, "n1")); diff != "" {
		t.Errorf("n1 (-want +got):\n%s", diff)
	}
	n.set(pi("b"), "n2") // moves
	n.set(pi("0"), "n1")
	n.forget(cpuPod("c", 100, 100, ""))
	if diff := cmp.Diff([]string{"ns/0", "ns/a"}, nominatedKeys(n, "n1")); diff != "" {
		t.Errorf("n1 after changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ns/b"}, nominatedKeys(n, "n2")); diff != "" {
		t.Errorf("n2 (-want +got):\n%s", diff)
	}
	var got []string
	for _, p := range before {
		got = append(got, p.Pod.Key())
	}
	if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/c"}, got); diff != "" {
		t.Errorf("a list handed out changed (-want +got):\n%s", diff)
	}
	if p, node := n.lookup("ns/b"); p == nil || node != "n2" {
		t.Errorf("lookup(b) = %v, %q; want n2", p, node)
	}
	n.forget(cpuPod("0", 100, 100, ""))
	n.forget(cpuPod("a", 100, 100, ""))
	n.forget(cpuPod("b", 100, 100, ""))
	if n.count.Load() != 0 || n.view.Load().nodes() != 0 {
		t.Errorf("all forgotten, yet %d nominations on %d nodes remain", n.count.Load(), n.view.Load().nodes())
	}
}

// A nominated pod is returned when the last victim it waits for is gone,
// and only while it is still nominated to the node it preempted on.
func TestNominatorVictims(t *testing.T) {
	p := framework.NewPodInfo(cpuPod("p", 100, 3000, ""))
	v1, v2, other := cpuPod("v1", 1, 900, "n1"), cpuPod("v2", 1, 900, "n1"), cpuPod("x", 1, 900, "n1")
	name := func(p *framework.Pod) string {
		if p == nil {
			return ""
		}
		return p.Name
	}
	tests := []struct {
		name  string
		after func(n *nominator) // between the preemption and the deletions
		want  []string           // victimGone's result for v1, x, v2
	}{
		{name: "the last victim gone", after: func(*nominator) {}, want: []string{"", "", "p"}},
		{name: "nominated again to the same node", after: func(n *nominator) { n.set(p, "n1") }, want: []string{"", "", "p"}},
		{name: "nominated elsewhere", after: func(n *nominator) { n.set(p, "n2") }, want: []string{"", "", ""}},
		{name: "forgotten", after: func(n *nominator) { n.forget(p.Pod) }, want: []string{"", "", ""}},
		{name: "preempted again", after: func(n *nominator) { n.nominate(p, "n1", []*framework.Pod{other}) }, want: []string{"", "p", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNominator()
			n.nominate(p, "n1", []*framework.Pod{v1, v2})
			tt.after(n)
			got := []string{name(n.victimGone(v1)), name(n.victimGone(other)), name(n.victimGone(v2))}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("victimGone (-want +got):\n%s", diff)
			}
			if len(n.victimOf) != 0 || len(n.waitingOn) != 0 {
				t.Errorf("victims left behind: %v, %v", n.victimOf, n.waitingOn)
			}
		})
	}
}

// NominatedPodsAgainst gives filters the nominated pods that count against
// a pod (priority at least its own, not itself) and, only when that is all
// of them, the memo of the node with them added.
func TestNominatedPodsAgainst(t *testing.T) {
	n := newNominator()
	for _, p := range []*framework.Pod{cpuPod("low", 1, 100, ""), cpuPod("same", 10, 100, ""), cpuPod("high", 20, 100, "")} {
		n.set(framework.NewPodInfo(p), "n1")
	}
	tests := []struct {
		name     string
		pod      *framework.Pod
		want     []string
		wantMemo bool
	}{
		{name: "all count", pod: cpuPod("p", 1, 100, ""), want: []string{"ns/high", "ns/low", "ns/same"}, wantMemo: true},
		{name: "lower priority left out", pod: cpuPod("p", 10, 100, ""), want: []string{"ns/high", "ns/same"}},
		{name: "itself left out", pod: cpuPod("same", 10, 100, ""), want: []string{"ns/high"}},
		{name: "none count", pod: cpuPod("p", 30, 100, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, memo := n.NominatedPodsAgainst(nodeInfo("n1"), tt.pod)
			var got []string
			for _, pi := range pods {
				got = append(got, pi.Pod.Key())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			if (memo != nil) != tt.wantMemo {
				t.Errorf("memo = %v, want one: %v", memo, tt.wantMemo)
			}
		})
	}
	if pods, memo := n.NominatedPodsAgainst(nodeInfo("n2"), cpuPod("p", 1, 100, "")); pods != nil || memo != nil {
		t.Errorf("n2 has no nominations, got %v, %v", pods, memo)
	}
}

func nodeInfo(name string) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&framework.Node{Name: name})
	return ni
}

// The view's bit filter never hides a nominated node, however many there
// are, and lets most others through without a lookup.
func TestNominationViewFilter(t *testing.T) {
	for _, nominated := range []int{1, 100, 5000} {
		byNode := map[string]nominations{}
		for i := range nominated {
			byNode[fmt.Sprintf("node-%05d", i)] = nominations{pods: []*framework.PodInfo{framework.NewPodInfo(cpuPod(fmt.Sprint(i), 1, 1, ""))}}
		}
		v := newNominationView(byNode)
		for name := range byNode {
			if len(v.get(nodeInfo(name)).pods) != 1 {
				t.Fatalf("%d nominated: %s's nomination is hidden", nominated, name)
			}
		}
		passed := 0
		for i := range 10000 {
			if v.mayHave(nodeInfo(fmt.Sprintf("other-%05d", i)).NameHash()) {
				passed++
			}
		}
		if passed > 1000 {
			t.Errorf("%d nominated: %d of 10000 other nodes pass the filter; want under a tenth", nominated, passed)
		}
	}
}

// A nomination's write copies only its node's bucket of the view: the
// others are shared with the previous view, and readers of either see
// what was published to them.
func TestNominationWriteCopiesOneBucket(t *testing.T) {
	n := newNominator()
	for i := range 500 {
		p := cpuPod(fmt.Sprint("p", i), 1, 1, "")
		n.set(framework.NewPodInfo(p), fmt.Sprintf("node-%03d", i))
	}
	before := n.view.Load()
	n.set(framework.NewPodInfo(cpuPod("extra", 1, 1, "")), "node-007")
	after := n.view.Load()
	changed := 0
	for i := range after.buckets {
		if after.buckets[i] != before.buckets[i] {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("one nomination changed %d buckets, want 1", changed)
	}
	if got, want := len(after.lookup("node-007").pods), 2; got != want {
		t.Errorf("node-007 has %d nominations in the new view, want %d", got, want)
	}
	if got := len(before.lookup("node-007").pods); got != 1 {
		t.Errorf("the previous view changed: node-007 has %d nominations there, want 1", got)
	}
	if got := after.nodes(); got != 500 {
		t.Errorf("%d nodes with nominations, want 500", got)
	}
}
