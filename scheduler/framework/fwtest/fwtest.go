// Package fwtest holds test helpers for the framework and its plugins: a
// snapshot lister over NodeInfos, node and pod builders, a fake clock and
// a recording binder. Tests only.
package fwtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// Lister is a fixed snapshot: a framework.SharedLister and
// framework.NodeInfoLister over the NodeInfos it was built with, in that
// order.
type Lister struct {
	nodes  []*framework.NodeInfo
	byName map[string]*framework.NodeInfo
}

var (
	_ framework.SharedLister   = (*Lister)(nil)
	_ framework.NodeInfoLister = (*Lister)(nil)
)

// NewLister returns a lister over nodes (each must have a Node).
func NewLister(nodes ...*framework.NodeInfo) *Lister {
	l := &Lister{}
	l.Set(nodes...)
	return l
}

// Set replaces the snapshot's nodes.
func (l *Lister) Set(nodes ...*framework.NodeInfo) {
	l.nodes = nodes
	l.byName = make(map[string]*framework.NodeInfo, len(nodes))
	for _, n := range nodes {
		l.byName[n.Node().Name] = n
	}
}

// NodeInfos implements framework.SharedLister.
func (l *Lister) NodeInfos() framework.NodeInfoLister { return l }

// List implements framework.NodeInfoLister.
func (l *Lister) List() []*framework.NodeInfo { return l.nodes }

// HavePodsWithAffinityList implements framework.NodeInfoLister.
func (l *Lister) HavePodsWithAffinityList() []*framework.NodeInfo {
	var out []*framework.NodeInfo
	for _, n := range l.nodes {
		if len(n.PodsWithAffinity) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// HavePodsWithRequiredAntiAffinityList implements framework.NodeInfoLister.
func (l *Lister) HavePodsWithRequiredAntiAffinityList() []*framework.NodeInfo {
	var out []*framework.NodeInfo
	for _, n := range l.nodes {
		if len(n.PodsWithRequiredAntiAffinity) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Get implements framework.NodeInfoLister.
func (l *Lister) Get(name string) (*framework.NodeInfo, error) {
	if n, ok := l.byName[name]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("fwtest: node %q not found", name)
}

// NodeInfo returns a NodeInfo for node holding pods.
func NodeInfo(node *framework.Node, pods ...*framework.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, p := range pods {
		ni.AddPodInfo(framework.NewPodInfo(p))
	}
	return ni
}

// Node returns a node with the given allocatable cpu (millicores), memory
// (bytes) and pod count.
func Node(name string, milliCPU, memory, pods int64) *framework.Node {
	return &framework.Node{Name: name, Allocatable: framework.ResourceList{
		framework.ResourceCPU: milliCPU, framework.ResourceMemory: memory, framework.ResourcePods: pods,
	}}
}

// Pod returns a pod with one container requesting rl (nil: nothing).
func Pod(name string, rl framework.ResourceList) *framework.Pod {
	return &framework.Pod{Namespace: "default", Name: name, UID: "uid-" + name,
		Containers: []framework.Container{{Name: "c", Requests: rl}}}
}

// Resources builds a ResourceList of cpu and memory, skipping zeros.
func Resources(milliCPU, memory int64) framework.ResourceList {
	rl := framework.ResourceList{}
	if milliCPU != 0 {
		rl[framework.ResourceCPU] = milliCPU
	}
	if memory != 0 {
		rl[framework.ResourceMemory] = memory
	}
	return rl
}

// FakeClock is a framework.Clock whose time moves only by Advance, which
// runs every due AfterFunc on the caller's goroutine, in time order.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

var _ framework.Clock = (*FakeClock)(nil)

// NewFakeClock returns a clock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now implements framework.Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements framework.Clock.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) framework.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Pending returns the number of timers not yet fired or stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves time forward by d and fires the timers that came due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

type fakeTimer struct {
	clock *FakeClock
	at    time.Time
	f     func()
}

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range c.timers {
		if o == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Binding is one call to Binder.Bind.
type Binding struct {
	Pod  string
	Node string
}

// Binder records bindings and returns Err.
type Binder struct {
	mu       sync.Mutex
	Err      error
	Bindings []Binding
}

var _ framework.Binder = (*Binder)(nil)

// Bind implements framework.Binder.
func (b *Binder) Bind(_ context.Context, pod *framework.Pod, nodeName string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Err != nil {
		return b.Err
	}
	b.Bindings = append(b.Bindings, Binding{Pod: pod.Key(), Node: nodeName})
	return nil
}
