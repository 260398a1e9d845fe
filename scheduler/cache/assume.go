package cache

import (
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
)

// An assumption is a placed pod charged to its node before its binding is
// committed: assumed, then finished (the commit landed), then confirmed by
// the watch's AddPod, or forgotten if the attempt fails.

// AssumePod charges a placed pod (NodeName set) to its node after checking
// it still fits the live NodeInfo, not the caller's snapshot: resources as
// NodeResourcesFit checks them (pod count, cpu, memory, ephemeral storage,
// extended resources) and host ports. On a conflict it returns an error
// wrapping ErrNodeChanged and changes nothing. The cache keeps pi; the caller
// must not modify it afterwards.
func (c *Cache) AssumePod(pi *framework.PodInfo) error {
	_, err := c.Assume(pi)
	return err
}

// Assumption is a pod AssumePod charged, for its binding cycle to report
// back on. The zero Assumption stands for none.
type Assumption struct{ ps *podState }

// Assume is AssumePod, returning the assumption.
func (c *Cache) Assume(pi *framework.PodInfo) (Assumption, error) {
	p := pi.Pod
	if p.NodeName == "" {
		return Assumption{}, fmt.Errorf("cache: pod %s has no node", p.Key())
	}
	key := p.Key()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[key]; ok {
		return Assumption{}, fmt.Errorf("%w: %s", ErrPodExists, key)
	}
	it, ok := c.nodes[p.NodeName]
	if !ok || it.info.Node() == nil {
		return Assumption{}, fmt.Errorf("%w: node %s is gone", ErrNodeChanged, p.NodeName)
	}
	if reason := c.misfit(pi, it.info); reason != "" {
		return Assumption{}, fmt.Errorf("%w: pod %s on node %s: %s", ErrNodeChanged, key, p.NodeName, reason)
	}
	ps := c.addPodKeyLocked(pi, key, true, it)
	c.placed.record(pi)
	return Assumption{ps: ps}, nil
}

// FinishBinding records that the assumed pod's binding was committed. The
// pod stays assumed until its bound record arrives through AddPod; nothing
// expires. Once the pod is confirmed or gone this changes nothing anyone
// reads.
//
// It changes no room, so it takes no lock: a group commit finishes
// hundreds of bindings at once, and as writers they queued ahead of every
// shard's snapshot update and assumption; as readers, an assumption still
// waited for all of them, and a reader waiting for a core held it up.
// Holding the assumption, rather than finding it by key in a concurrent
// map, also spares every assumption and confirmation an update of that
// map under the cache's write lock.
func (a Assumption) FinishBinding() {
	if a.ps != nil {
		a.ps.bindingFinished.Store(true)
	}
}

// FinishBinding is Assumption.FinishBinding for a caller holding only the
// pod; it looks the pod up under the read lock.
func (c *Cache) FinishBinding(p *framework.Pod) error {
	key := p.Key()
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.pods[key]
	if !ok || !ps.assumed {
		return fmt.Errorf("%w: %s", ErrNotAssumed, key)
	}
	ps.bindingFinished.Store(true)
	return nil
}

// ForgetPod undoes an assumption. A pod no longer cached is not an error;
// a pod that is bound, or assumed on another node, is.
func (c *Cache) ForgetPod(p *framework.Pod) error {
	key := p.Key()
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[key]
	if !ok {
		return nil
	}
	if !ps.assumed {
		return fmt.Errorf("%w: %s is bound", ErrNotAssumed, key)
	}
	if on := ps.info.Pod.NodeName; p.NodeName != "" && p.NodeName != on {
		return fmt.Errorf("%w: %s is assumed on %s, not %s", ErrNotAssumed, key, on, p.NodeName)
	}
	return c.removePodLocked(key, ps)
}

// IsAssumed reports whether the pod is assumed and not yet confirmed.
func (c *Cache) IsAssumed(key string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.pods[key]
	return ok && ps.assumed
}
