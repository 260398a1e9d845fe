package cache

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

func node(name string, alloc framework.ResourceList) *framework.Node {
	return &framework.Node{Name: name, Allocatable: alloc}
}

func stdNode(name string) *framework.Node {
	return node(name, framework.ResourceList{"cpu": 4000, "memory": 4 << 30, "pods": 110})
}

func pod(name, nodeName string, cpu int64) *framework.Pod {
	return &framework.Pod{
		Namespace: "ns", Name: name, UID: name, NodeName: nodeName, Phase: framework.PodBound,
		Containers: []framework.Container{{Name: "c", Requests: framework.ResourceList{"cpu": cpu}}},
	}
}

func withNode(p *framework.Pod, nodeName string) *framework.Pod {
	c := *p
	c.NodeName = nodeName
	return &c
}

func withPhase(p *framework.Pod, phase framework.PodPhase) *framework.Pod {
	c := *p
	c.Phase = phase
	return &c
}

// nodeState is what the state machine tests compare per node.
type nodeState struct {
	CPU  int64
	Pods []string
}

type cacheState struct {
	Nodes   map[string]nodeState
	Assumed []string
	Pods    int
}

func stateOf(c *Cache) cacheState {
	d := c.Dump()
	s := cacheState{Nodes: map[string]nodeState{}, Pods: c.PodCount()}
	for name, ni := range d.Nodes {
		ns := nodeState{CPU: ni.Requested.MilliCPU}
		for _, pi := range ni.Pods {
			ns.Pods = append(ns.Pods, pi.Pod.Key())
		}
		slices.Sort(ns.Pods)
		s.Nodes[name] = ns
	}
	for k := range d.AssumedPods {
		s.Assumed = append(s.Assumed, k)
	}
	slices.Sort(s.Assumed)
	if n := c.AssumedPodCount(); n != len(s.Assumed) {
		panic(fmt.Sprintf("AssumedPodCount %d, dump has %d", n, len(s.Assumed)))
	}
	return s
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestStateMachine(t *testing.T) {
	p := pod("p", "a", 500)
	type op func(c *Cache) error
	assume := func(p *framework.Pod) op {
		return func(c *Cache) error { return c.AssumePod(framework.NewPodInfo(p)) }
	}
	add := func(p *framework.Pod) op { return func(c *Cache) error { return c.AddPod(p) } }
	update := func(old, p *framework.Pod) op { return func(c *Cache) error { return c.UpdatePod(old, p) } }
	forget := func(p *framework.Pod) op { return func(c *Cache) error { return c.ForgetPod(p) } }
	remove := func(p *framework.Pod) op { return func(c *Cache) error { return c.RemovePod(p) } }
	finish := func(p *framework.Pod) op { return func(c *Cache) error { return c.FinishBinding(p) } }

	empty := map[string]nodeState{"a": {}, "b": {}}
	tests := []struct {
		name    string
		ops     []op
		wantErr []error // per op; nil entries mean success
		want    cacheState
	}{
		{
			name: "assume",
			ops:  []op{assume(p)},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Assumed: []string{"ns/p"}, Pods: 1},
		},
		{
			name: "assume, finish binding: still assumed (no expiry)",
			ops:  []op{assume(p), finish(p)},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Assumed: []string{"ns/p"}, Pods: 1},
		},
		{
			name: "assume, confirm by add",
			ops:  []op{assume(p), finish(p), add(p)},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Pods: 1},
		},
		{
			name: "assume, confirm by update (watch delivers the bound record as an update)",
			ops:  []op{assume(p), update(withNode(p, ""), p)},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Pods: 1},
		},
		{
			name: "assumed at 500m, confirmed at 700m: the node is charged the confirmed",
			ops:  []op{assume(p), add(pod("p", "a", 700))},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 700, Pods: []string{"ns/p"}}, "b": {}}, Pods: 1},
		},
		{
			name: "assumed on a, confirmed on b: moved",
			ops:  []op{assume(p), add(withNode(p, "b"))},
			want: cacheState{Nodes: map[string]nodeState{"a": {}, "b": {CPU: 500, Pods: []string{"ns/p"}}}, Pods: 1},
		},
		{
			name: "assume, forget",
			ops:  []op{assume(p), forget(p)},
			want: cacheState{Nodes: empty},
		},
		{
			name: "assume, remove",
			ops:  []op{assume(p), remove(p)},
			want: cacheState{Nodes: empty},
		},
		{
			name:    "assume twice",
			ops:     []op{assume(p), assume(p)},
			wantErr: []error{nil, ErrPodExists},
			want:    cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Assumed: []string{"ns/p"}, Pods: 1},
		},
		{
			name:    "forget a bound pod fails",
			ops:     []op{add(p), forget(p)},
			wantErr: []error{nil, ErrNotAssumed},
			want:    cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Pods: 1},
		},
		{
			name:    "forget on the wrong node fails",
			ops:     []op{assume(p), forget(withNode(p, "b"))},
			wantErr: []error{nil, ErrNotAssumed},
			want:    cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Assumed: []string{"ns/p"}, Pods: 1},
		},
		{
			name: "forget an unknown pod is a no-op",
			ops:  []op{forget(p)},
			want: cacheState{Nodes: empty},
		},
		{
			name:    "finish binding of an unassumed pod fails",
			ops:     []op{finish(p)},
			wantErr: []error{ErrNotAssumed},
			want:    cacheState{Nodes: empty},
		},
		{
			name: "add twice replaces (re-list)",
			ops:  []op{add(p), add(pod("p", "a", 700))},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 700, Pods: []string{"ns/p"}}, "b": {}}, Pods: 1},
		},
		{
			name: "update moves between nodes",
			ops:  []op{add(p), update(p, withNode(p, "b"))},
			want: cacheState{Nodes: map[string]nodeState{"a": {}, "b": {CPU: 500, Pods: []string{"ns/p"}}}, Pods: 1},
		},
		{
			name:    "remove unknown",
			ops:     []op{remove(p)},
			wantErr: []error{ErrPodNotFound},
			want:    cacheState{Nodes: empty},
		},
		{
			name: "terminal add is ignored",
			ops:  []op{add(withPhase(p, framework.PodSucceeded))},
			want: cacheState{Nodes: empty},
		},
		{
			name: "update to terminal frees the room",
			ops:  []op{add(p), update(p, withPhase(p, framework.PodFailed))},
			want: cacheState{Nodes: empty},
		},
		{
			name: "terminal add of a bound pod frees the room",
			ops:  []op{add(p), add(withPhase(p, framework.PodSucceeded))},
			want: cacheState{Nodes: empty},
		},
		{
			name: "pending-record update keeps the assumption",
			ops:  []op{assume(p), update(withNode(p, ""), withNode(p, ""))},
			want: cacheState{Nodes: map[string]nodeState{"a": {CPU: 500, Pods: []string{"ns/p"}}, "b": {}}, Assumed: []string{"ns/p"}, Pods: 1},
		},
		{
			name: "bound pod sent back to pending is removed",
			ops:  []op{add(p), update(p, withNode(p, ""))},
			want: cacheState{Nodes: empty},
		},
		{
			name: "assumed pod that ends is removed",
			ops:  []op{assume(p), update(withNode(p, ""), withPhase(withNode(p, ""), framework.PodFailed))},
			want: cacheState{Nodes: empty},
		},
		{
			name: "update of an unknown terminal pod is a no-op",
			ops:  []op{update(p, withPhase(p, framework.PodFailed))},
			want: cacheState{Nodes: empty},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			c.AddNode(stdNode("a"))
			c.AddNode(stdNode("b"))
			for i, o := range tc.ops {
				var want error
				if i < len(tc.wantErr) {
					want = tc.wantErr[i]
				}
				err := o(c)
				if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
					t.Fatalf("op %d: err = %v, want %v", i, err, want)
				}
			}
			if diff := cmp.Diff(tc.want, stateOf(c)); diff != "" {
				t.Errorf("state (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestGetPodAndIsAssumed(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	p := pod("p", "a", 1)
	if err := c.AssumePod(framework.NewPodInfo(p)); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.GetPod("ns/p"); !ok || got != p || !c.IsAssumed("ns/p") {
		t.Fatalf("GetPod = %v, %v; IsAssumed = %v", got, ok, c.IsAssumed("ns/p"))
	}
	bound := withNode(p, "a")
	if err := c.AddPod(bound); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetPod("ns/p"); got != bound || c.IsAssumed("ns/p") {
		t.Fatalf("after confirm: GetPod = %p (want %p), IsAssumed = %v", got, bound, c.IsAssumed("ns/p"))
	}
	if _, ok := c.GetPod("ns/q"); ok {
		t.Fatal("GetPod of unknown pod succeeded")
	}
}

// AddBoundPod tells a placement (a confirmation, or a pod bound elsewhere)
// from an update of a pod already bound: the scheduler broadcasts a new
// assigned pod only for the first.
func TestAddBoundPodReportsWasBound(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	c.AddNode(stdNode("b"))
	assumed := pod("p", "a", 100)
	if err := c.AssumePod(framework.NewPodInfo(assumed)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		p        *framework.Pod
		wasBound bool
		cpuA     int64
		cpuB     int64
	}{
		{"confirmation of an assumption", withNode(assumed, "a"), false, 100, 0},
		{"update of the bound pod", withNode(assumed, "a"), true, 100, 0},
		{"bound pod moved", withNode(assumed, "b"), true, 0, 100},
		{"pod bound elsewhere", pod("q", "a", 50), false, 50, 100},
		{"terminal bound pod", withPhase(pod("q", "a", 50), framework.PodSucceeded), true, 0, 100},
		{"terminal unknown pod", withPhase(pod("r", "a", 50), framework.PodSucceeded), false, 0, 100},
	}
	for _, st := range steps {
		wasBound, err := c.AddBoundPod(st.p)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if wasBound != st.wasBound {
			t.Errorf("%s: wasBound = %v, want %v", st.name, wasBound, st.wasBound)
		}
		got := stateOf(c)
		if got.Nodes["a"].CPU != st.cpuA || got.Nodes["b"].CPU != st.cpuB || len(got.Assumed) != 0 {
			t.Errorf("%s: cpu a=%d b=%d assumed %v; want a=%d b=%d, none assumed", st.name,
				got.Nodes["a"].CPU, got.Nodes["b"].CPU, got.Assumed, st.cpuA, st.cpuB)
		}
	}
}

func TestAssumePodConflict(t *testing.T) {
	port := func(p *framework.Pod, ip string, proto framework.Protocol, hostPort int32) *framework.Pod {
		p.Containers[0].Ports = append(p.Containers[0].Ports, framework.ContainerPort{ContainerPort: 80, HostPort: hostPort, HostIP: ip, Protocol: proto})
		return p
	}
	req := func(p *framework.Pod, rl framework.ResourceList) *framework.Pod {
		for k, v := range rl {
			p.Containers[0].Requests[k] = v
		}
		return p
	}
	n := node("n", framework.ResourceList{"cpu": 1000, "memory": 1000, "ephemeral-storage": 1000, "pods": 2, "example.com/gpu": 2})
	// existing holds cpu 600, memory 600, storage 600, one gpu and host port
	// 8080/TCP on 10.0.0.1.
	existing := port(req(pod("old", "n", 600), framework.ResourceList{"memory": 600, "ephemeral-storage": 600, "example.com/gpu": 1}), "10.0.0.1", framework.ProtocolTCP, 8080)

	tests := []struct {
		name     string
		pod      *framework.Pod
		opts     []Option
		conflict bool
	}{
		{name: "fits", pod: pod("p", "n", 400)},
		{name: "cpu", pod: pod("p", "n", 401), conflict: true},
		{name: "memory", pod: req(pod("p", "n", 0), framework.ResourceList{"memory": 401}), conflict: true},
		{name: "ephemeral storage", pod: req(pod("p", "n", 0), framework.ResourceList{"ephemeral-storage": 401}), conflict: true},
		{name: "extended resource exceeded", pod: req(pod("p", "n", 0), framework.ResourceList{"example.com/gpu": 2}), conflict: true},
		{name: "extended resource fits", pod: req(pod("p", "n", 0), framework.ResourceList{"example.com/gpu": 1})},
		{name: "extended resource the node lacks", pod: req(pod("p", "n", 0), framework.ResourceList{"example.com/fpga": 1}), conflict: true},
		{name: "ignored extended resource", pod: req(pod("p", "n", 0), framework.ResourceList{"example.com/fpga": 1}), opts: []Option{WithIgnoredResources("example.com/fpga")}},
		{name: "ignored resource group", pod: req(pod("p", "n", 0), framework.ResourceList{"example.com/fpga": 1}), opts: []Option{WithIgnoredResourceGroups("example.com")}},
		{name: "zero request of a lacking resource", pod: req(pod("p", "n", 0), framework.ResourceList{"example.com/fpga": 0})},
		{name: "same host port and ip", pod: port(pod("p", "n", 0), "10.0.0.1", framework.ProtocolTCP, 8080), conflict: true},
		{name: "same host port, other ip", pod: port(pod("p", "n", 0), "10.0.0.2", framework.ProtocolTCP, 8080)},
		{name: "same host port, other protocol", pod: port(pod("p", "n", 0), "10.0.0.1", framework.ProtocolUDP, 8080)},
		{name: "wildcard ip clashes with a specific ip", pod: port(pod("p", "n", 0), "", "", 8080), conflict: true},
		{name: "0.0.0.0 clashes with a specific ip", pod: port(pod("p", "n", 0), "0.0.0.0", framework.ProtocolTCP, 8080), conflict: true},
		{name: "other host port", pod: port(pod("p", "n", 0), "10.0.0.1", framework.ProtocolTCP, 8081)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.opts...)
			c.AddNode(n)
			if err := c.AddPod(existing); err != nil {
				t.Fatal(err)
			}
			before, _ := c.NodeInfo("n")
			err := c.AssumePod(framework.NewPodInfo(tc.pod))
			if got := errors.Is(err, ErrNodeChanged); got != tc.conflict || (!tc.conflict && err != nil) {
				t.Fatalf("AssumePod err = %v, want conflict %v", err, tc.conflict)
			}
			if !tc.conflict {
				return
			}
			after, _ := c.NodeInfo("n")
			if after.Generation != before.Generation || len(after.Pods) != 1 || c.PodCount() != 1 || c.IsAssumed("ns/p") {
				t.Errorf("conflict changed the cache: gen %d->%d, pods %d, cached %d", before.Generation, after.Generation, len(after.Pods), c.PodCount())
			}
		})
	}
}

func TestAssumePodConflictFromOtherPods(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *Cache)
	}{
		{name: "pods count", setup: func(c *Cache) {
			for i := range 2 {
				if err := c.AddPod(pod(fmt.Sprint("b", i), "n", 0)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "another shard assumed first", setup: func(c *Cache) {
			if err := c.AssumePod(framework.NewPodInfo(pod("other", "n", 800))); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "node removed", setup: func(c *Cache) { c.RemoveNode("n") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			c.AddNode(node("n", framework.ResourceList{"cpu": 1000, "pods": 2}))
			tc.setup(c)
			if err := c.AssumePod(framework.NewPodInfo(pod("p", "n", 300))); !errors.Is(err, ErrNodeChanged) {
				t.Fatalf("AssumePod err = %v, want ErrNodeChanged", err)
			}
		})
	}
}

func TestNodeRemovalKeepsPods(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	c.AddNode(stdNode("b"))
	p := pod("p", "a", 100)
	if err := c.AddPod(p); err != nil {
		t.Fatal(err)
	}
	snap := NewEmptySnapshot()
	mustUpdate(t, c, snap)

	c.RemoveNode("a")
	if _, ok := c.NodeInfo("a"); ok {
		t.Error("NodeInfo(a) found after RemoveNode")
	}
	if c.NodeCount() != 1 || c.PodCount() != 1 {
		t.Errorf("counts = %d nodes, %d pods; want 1, 1", c.NodeCount(), c.PodCount())
	}
	if ghost, ok := c.Dump().Nodes["a"]; !ok || len(ghost.Pods) != 1 || ghost.Node() != nil {
		t.Fatalf("node-less NodeInfo for a not kept: %+v", ghost)
	}
	mustUpdate(t, c, snap)
	if diff := cmp.Diff([]string{"b"}, names(snap.List())); diff != "" {
		t.Errorf("snapshot nodes (-want,+got):\n%s", diff)
	}
	if _, err := snap.Get("a"); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("snap.Get(a) err = %v", err)
	}

	// The node returns before its pod's deletion arrives: still charged.
	c.AddNode(stdNode("a"))
	if ni, _ := c.NodeInfo("a"); ni.Requested.MilliCPU != 100 {
		t.Errorf("re-added node a requested cpu = %d, want 100", ni.Requested.MilliCPU)
	}
	c.RemoveNode("a")
	if err := c.RemovePod(p); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Dump().Nodes["a"]; ok {
		t.Error("empty node-less NodeInfo not dropped")
	}
	mustUpdate(t, c, snap)
	if snap.NumNodes() != 1 {
		t.Errorf("snapshot has %d nodes, want 1", snap.NumNodes())
	}
}

func TestPodBeforeNode(t *testing.T) {
	c := New()
	if err := c.AddPod(pod("p", "late", 250)); err != nil {
		t.Fatal(err)
	}
	snap := NewEmptySnapshot()
	mustUpdate(t, c, snap)
	if snap.NumNodes() != 0 || c.NodeCount() != 0 {
		t.Fatalf("node-less NodeInfo visible: snapshot %d, cache %d", snap.NumNodes(), c.NodeCount())
	}
	c.AddNode(stdNode("late"))
	mustUpdate(t, c, snap)
	ni, err := snap.Get("late")
	if err != nil || ni.Requested.MilliCPU != 250 || len(ni.Pods) != 1 {
		t.Fatalf("late node = %+v, %v; want the early pod charged", ni, err)
	}
}

func TestImageStates(t *testing.T) {
	img := func(size int64, names ...string) framework.ContainerImage {
		return framework.ContainerImage{Names: names, SizeBytes: size}
	}
	a := stdNode("a")
	a.Images = []framework.ContainerImage{img(100, "x", "x:1"), img(50, "y")}
	b := stdNode("b")
	b.Images = []framework.ContainerImage{img(100, "x"), img(100, "x")} // duplicate counts once

	type summary = map[string]framework.ImageStateSummary
	read := func(ni *framework.NodeInfo) summary {
		s := summary{}
		for k, v := range ni.ImageStates {
			s[k] = *v
		}
		return s
	}

	c := New()
	c.AddNode(a)
	c.AddNode(b)
	snap := NewEmptySnapshot()
	mustUpdate(t, c, snap)
	gotA, _ := snap.Get("a")
	gotB, _ := snap.Get("b")
	if diff := cmp.Diff(summary{"x": {Size: 100, NumNodes: 2}, "x:1": {Size: 100, NumNodes: 1}, "y": {Size: 50, NumNodes: 1}}, read(gotA)); diff != "" {
		t.Errorf("a (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(summary{"x": {Size: 100, NumNodes: 2}}, read(gotB)); diff != "" {
		t.Errorf("b (-want,+got):\n%s", diff)
	}

	// b drops image x: the live count for a follows at once.
	b2 := stdNode("b")
	c.AddNode(b2)
	liveA, _ := c.NodeInfo("a")
	if diff := cmp.Diff(summary{"x": {Size: 100, NumNodes: 1}, "x:1": {Size: 100, NumNodes: 1}, "y": {Size: 50, NumNodes: 1}}, read(liveA)); diff != "" {
		t.Errorf("a after b changed (-want,+got):\n%s", diff)
	}
	c.RemoveNode("a")
	if len(c.images) != 0 {
		t.Errorf("images left after all nodes dropped them: %v", c.images)
	}

	// NewSnapshot counts the same way.
	s := NewSnapshot(nil, []*framework.Node{a, b})
	sa, _ := s.Get("a")
	if diff := cmp.Diff(summary{"x": {Size: 100, NumNodes: 2}, "x:1": {Size: 100, NumNodes: 1}, "y": {Size: 50, NumNodes: 1}}, read(sa)); diff != "" {
		t.Errorf("NewSnapshot a (-want,+got):\n%s", diff)
	}
}

func TestCounts(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	c.AddNode(stdNode("a")) // update, not a second node
	if err := c.AddPod(pod("bound", "a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.AssumePod(framework.NewPodInfo(pod("assumed", "a", 1))); err != nil {
		t.Fatal(err)
	}
	got := []int{c.NodeCount(), c.PodCount(), c.AssumedPodCount()}
	if diff := cmp.Diff([]int{1, 2, 1}, got); diff != "" {
		t.Errorf("nodes, pods, assumed (-want,+got):\n%s", diff)
	}
}

// TestConcurrentAssumeNeverOvercommits races shards assuming onto one node:
// exactly as many pods as fit are charged, the rest conflict, while other
// goroutines refresh snapshots.
func TestConcurrentAssumeNeverOvercommits(t *testing.T) {
	c := New()
	c.AddNode(node("n", framework.ResourceList{"cpu": 1000, "pods": 110}))
	const shards, perShard = 4, 25
	results := make(chan error, shards*perShard)
	done := make(chan struct{})
	for s := range shards {
		go func() {
			for i := range perShard {
				results <- c.AssumePod(framework.NewPodInfo(pod(fmt.Sprint("s", s, "-", i), "n", 100)))
			}
		}()
	}
	go func() {
		defer close(done)
		snap := NewEmptySnapshot()
		for range 50 {
			if err := c.UpdateSnapshot(snap); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ok, conflicts := 0, 0
	for range shards * perShard {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, ErrNodeChanged):
			conflicts++
		default:
			t.Fatal(err)
		}
	}
	<-done
	ni, _ := c.NodeInfo("n")
	if ok != 10 || conflicts != shards*perShard-10 || ni.Requested.MilliCPU != 1000 {
		t.Errorf("assumed %d, conflicts %d, requested %d; want 10 pods filling 1000m", ok, conflicts, ni.Requested.MilliCPU)
	}
}

// TestAssumptionFinishBinding: the binding cycle reports through the
// assumption it holds, and a confirmation on the same node replaces the
// pod in place (LookupPod, counts and the node's pods follow).
func TestAssumptionFinishBinding(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	p := pod("p", "a", 100)
	a, err := c.Assume(framework.NewPodInfo(p))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Dump(); d.AssumedPods["ns/p"] {
		t.Fatal("binding finished before FinishBinding")
	}
	a.FinishBinding()
	if d := c.Dump(); !d.AssumedPods["ns/p"] {
		t.Fatalf("AssumedPods = %v, want ns/p finished", d.AssumedPods)
	}
	bound := withNode(p, "a")
	if err := c.AddPod(bound); err != nil {
		t.Fatal(err)
	}
	got, assumed, ok := c.LookupPod("ns/p")
	if !ok || assumed || got != bound {
		t.Fatalf("LookupPod = %p, %v, %v; want %p, false, true", got, assumed, ok, bound)
	}
	want := cacheState{Nodes: map[string]nodeState{"a": {CPU: 100, Pods: []string{"ns/p"}}}, Pods: 1}
	if diff := cmp.Diff(want, stateOf(c)); diff != "" {
		t.Errorf("after confirm (-want,+got):\n%s", diff)
	}
	a.FinishBinding() // late: changes nothing anyone reads
	Assumption{}.FinishBinding()
	if n := c.AssumedPodCount(); n != 0 {
		t.Errorf("AssumedPodCount = %d after confirm", n)
	}
}
