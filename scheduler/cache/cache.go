// Package cache is the in-memory view of the cluster that every shard loop of
// one replica schedules against: nodes with the pods bound or assumed on
// them, and incremental snapshots of that view.
package cache

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
)

// Errors, checked with errors.Is.
var (
	// ErrNodeChanged means the room a pod was placed into is gone: another
	// shard (or replica) took it after this shard's snapshot, or the node
	// left. The pod should be retried at once against a fresh snapshot.
	ErrNodeChanged = errors.New("cache: node changed since snapshot")
	// ErrPodExists means the pod is already in the cache (assumed or bound).
	ErrPodExists = errors.New("cache: pod already cached")
	// ErrPodNotFound means the pod is not in the cache.
	ErrPodNotFound = errors.New("cache: pod not cached")
	// ErrNotAssumed means an operation on an assumption found none.
	ErrNotAssumed = errors.New("cache: pod not assumed")
	// ErrNodeNotFound means a snapshot has no such node.
	ErrNodeNotFound = errors.New("cache: node not found")
)

// Cache is the shared cluster view. All methods are safe for concurrent use;
// one RWMutex guards everything, and snapshot updates only read-lock it, so
// shard loops refresh their snapshots in parallel.
//
// A pod moves through these states (keyed by namespace/name):
//
//	           AssumePod               AddPod / UpdatePod
//	Initial ------------> Assumed ------------------------> Added --+
//	  |  ^                |  |  |       (confirm, on the       ^  |  | AddPod /
//	  |  +-- ForgetPod ---+  |  |        bound node)           |  |  | UpdatePod
//	  |                      |  +-- FinishBinding: stays       |  +--+
//	  |                      |      Assumed                    |  |
//	  +------ AddPod --------|---------------------------------+  |
//	                         | RemovePod                          | RemovePod, or
//	                         v                                    | update to terminal
//	                      Deleted <-------------------------------+ or to unbound
//
// What the cache assumes of its callers:
//   - Assume is called only for a pod the caller owns (its shard) and has
//     placed; an assumed pod is confirmed by AddPod/UpdatePod (the bound
//     record arrived), undone by ForgetPod (the attempt failed), or dropped
//     by RemovePod (the pod was deleted).
//   - There is no expiry: an assumption never ends on a timer, because a
//     timer can fire while the binding is still landing and free room the
//     pod is about to use. Assumptions die with explicit release only (the
//     owner's lease loss is turned into ForgetPod calls by the caller).
//   - Pods and nodes arrive from separate watches, so a pod may name a node
//     the cache does not know yet (or any more). Such pods are still charged
//     to a node-less NodeInfo, which becomes visible when the node arrives
//     and is dropped when its last pod leaves.
type Cache struct {
	ignoredResources      map[string]bool
	ignoredResourceGroups map[string]bool

	mu spinRWMutex
	// nodes holds every NodeInfo, including node-less ones that still carry
	// pods. Each item is also in the recency list starting at head.
	nodes map[string]*nodeItem
	// head is the most recently changed NodeInfo; generations decrease along
	// next, which lets UpdateSnapshot stop at the first node it already has.
	head *nodeItem
	// tree lists the nodes that have a Node, in snapshot order.
	tree *nodeTree
	pods map[string]*podState
	// podsPeak lets pods shrink after mass deletions
	// (framework.DeleteShrinking).
	podsPeak int
	// assumed counts the pods in state Assumed.
	assumed int
	// images maps an image name to its size and how many known nodes hold
	// it. NodeInfos in the cache point at these shared entries; clones copy
	// them, freezing NumNodes at clone time as Kubernetes does.
	images map[string]*framework.ImageStateSummary
	// placed numbers new placements for cross-shard re-checks.
	placed placementLog
	// parallelLoads counts the loads loadLocked charged on every core.
	parallelLoads int
}

type nodeItem struct {
	info       *framework.NodeInfo
	prev, next *nodeItem
}

type podState struct {
	info *framework.PodInfo
	// item is the NodeInfo the pod is charged to, info.Pod.NodeName's: a
	// charged pod keeps its item from being dropped, and holding it spares
	// every confirmation and removal a lookup under the write lock.
	item    *nodeItem
	assumed bool
	// bindingFinished is set by FinishBinding; it is informational only
	// (shown by Dump): nothing expires because of it. It is atomic so
	// Assumption.FinishBinding needs no lock: see there.
	bindingFinished atomic.Bool
}

// Option configures a Cache.
type Option func(*Cache)

// WithIgnoredResources makes AssumePod skip the named extended resources, as
// NodeResourcesFit does with its ignoredResources argument. Configure both
// the same way, or a pod the filter accepts conflicts forever.
func WithIgnoredResources(names ...string) Option {
	return func(c *Cache) {
		for _, n := range names {
			c.ignoredResources[n] = true
		}
	}
}

// WithIgnoredResourceGroups makes AssumePod skip extended resources whose
// name prefix (before "/") is one of groups, like NodeResourcesFit's
// ignoredResourceGroups.
func WithIgnoredResourceGroups(groups ...string) Option {
	return func(c *Cache) {
		for _, g := range groups {
			c.ignoredResourceGroups[g] = true
		}
	}
}

// New returns an empty cache.
func New(opts ...Option) *Cache {
	c := &Cache{
		ignoredResources:      map[string]bool{},
		ignoredResourceGroups: map[string]bool{},
		nodes:                 map[string]*nodeItem{},
		tree:                  newNodeTree(),
		pods:                  map[string]*podState{},
		images:                map[string]*framework.ImageStateSummary{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// moveToHead marks an item as the most recently changed. Callers hold mu and
// have already bumped the item's generation.
func (c *Cache) moveToHead(it *nodeItem) {
	if c.head == it {
		return
	}
	c.unlink(it)
	it.next = c.head
	if c.head != nil {
		c.head.prev = it
	}
	c.head = it
}

func (c *Cache) unlink(it *nodeItem) {
	if it.prev != nil {
		it.prev.next = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	}
	if c.head == it {
		c.head = it.next
	}
	it.prev, it.next = nil, nil
}

// item returns the NodeInfo item for name, creating a node-less one.
func (c *Cache) item(name string) *nodeItem {
	it, ok := c.nodes[name]
	if !ok {
		it = &nodeItem{info: framework.NewNodeInfo()}
		c.nodes[name] = it
	}
	return it
}

// dropIfEmpty forgets a node-less NodeInfo with no pods left; otherwise it
// moves the item to the head because it changed.
func (c *Cache) dropIfEmpty(name string, it *nodeItem) {
	if it.info.Node() == nil && len(it.info.Pods) == 0 {
		c.unlink(it)
		delete(c.nodes, name)
		return
	}
	c.moveToHead(it)
}

// AddNode adds a node or replaces its spec.
func (c *Cache) AddNode(n *framework.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addNodeLocked(n)
}

// AddNodes is AddNode for many nodes under one lock, as a restart loads
// them: into a cache that knows none yet, the maps are sized once instead
// of growing to a hundred thousand names a doubling at a time.
func (c *Cache) AddNodes(nodes []*framework.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.nodes) == 0 {
		c.nodes = make(map[string]*nodeItem, len(nodes))
		c.tree.zoneOf = make(map[string]string, len(nodes))
	}
	for _, n := range nodes {
		c.addNodeLocked(n)
	}
}

func (c *Cache) addNodeLocked(n *framework.Node) {
	it := c.item(n.Name)
	c.removeImages(it.info)
	it.info.SetNode(n)
	c.addImages(n, it.info)
	c.tree.add(n)
	c.moveToHead(it)
}

// RemoveNode forgets a node. Its NodeInfo stays, node-less and out of
// snapshots, while pods still reference it: their deletions come from
// another watch and may arrive later.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.nodes[name]
	if !ok || it.info.Node() == nil {
		return
	}
	c.removeImages(it.info)
	it.info.RemoveNode()
	c.tree.remove(name)
	c.dropIfEmpty(name, it)
}

// addImages points the NodeInfo's image states at the shared per-image
// entries, counting the node once per distinct image name.
func (c *Cache) addImages(n *framework.Node, ni *framework.NodeInfo) {
	states := make(map[string]*framework.ImageStateSummary, len(n.Images))
	for _, img := range n.Images {
		for _, name := range img.Names {
			if _, dup := states[name]; dup {
				continue
			}
			s, ok := c.images[name]
			if !ok {
				s = &framework.ImageStateSummary{Size: img.SizeBytes}
				c.images[name] = s
			}
			s.NumNodes++
			states[name] = s
		}
	}
	ni.ImageStates = states
}

func (c *Cache) removeImages(ni *framework.NodeInfo) {
	for name := range ni.ImageStates {
		if s, ok := c.images[name]; ok {
			s.NumNodes--
			if s.NumNodes <= 0 {
				delete(c.images, name)
			}
		}
	}
	ni.ImageStates = map[string]*framework.ImageStateSummary{}
}

// addPodKeyLocked charges a pod, whose key the caller has, to its node's
// item it.
func (c *Cache) addPodKeyLocked(pi *framework.PodInfo, key string, assumed bool, it *nodeItem) *podState {
	it.info.AddPodInfo(pi)
	c.moveToHead(it)
	ps := &podState{info: pi, item: it, assumed: assumed}
	c.pods[key] = ps
	if assumed {
		c.assumed++
	}
	return ps
}

// replaceOnNodeLocked makes pi, bound, the version of the cached pod ps
// charged to the same node, keeping its entry in pods: every binding's
// confirmation lands here, under the write lock the shard loops' snapshot
// updates and assumptions wait for, and a delete and insert in a map of
// every pod were most of it. A confirmation that charges what its
// assumption did (nearly all) swaps the PodInfo in place. False, with
// nothing changed, if the node does not hold the pod: the caller then
// removes and adds as for any move.
func (c *Cache) replaceOnNodeLocked(ps *podState, pi *framework.PodInfo) bool {
	it := ps.item
	if !it.info.ReplacePodInfo(pi) {
		if it.info.RemovePod(ps.info.Pod) != nil {
			return false
		}
		it.info.AddPodInfo(pi)
	}
	if ps.assumed {
		c.assumed--
	}
	c.moveToHead(it)
	ps.info, ps.assumed = pi, false
	return true
}

// removePodLocked releases a cached pod from the node it is charged to.
func (c *Cache) removePodLocked(key string, ps *podState) error {
	c.pods = framework.DeleteShrinking(c.pods, key, &c.podsPeak)
	if ps.assumed {
		c.assumed--
	}
	it := ps.item
	if err := it.info.RemovePod(ps.info.Pod); err != nil {
		// Nothing changed, so the generation did not move: leave the item
		// where it is, or the recency list would lose its order.
		return err
	}
	c.dropIfEmpty(ps.info.Pod.NodeName, it)
	return nil
}

// AddPod records a bound pod (NodeName set). It confirms an assumption of
// the same pod, moving it if it was bound to another node than assumed. A
// pod already added is replaced, so a watch re-list may re-add everything.
// A terminal pod holds no resources: it is removed if cached, else ignored.
func (c *Cache) AddPod(p *framework.Pod) error {
	_, err := c.AddBoundPod(p)
	return err
}

// AddBoundPod is AddPod, also reporting whether the cache already held
// the pod as bound (not assumed): the record is then an update of a pod
// already placed, not a new placement. Every binding's confirmation comes
// here, so the question and the change take one lock and one lookup.
func (c *Cache) AddBoundPod(p *framework.Pod) (wasBound bool, err error) {
	if p.NodeName == "" {
		return false, fmt.Errorf("cache: pod %s has no node", p.Key())
	}
	key := p.Key()
	var pi *framework.PodInfo
	if !p.Phase.Terminal() {
		// Built before the lock: the shard loops' assumptions wait for it.
		pi = framework.NewPodInfo(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[key]
	wasBound = ok && !ps.assumed
	if pi == nil {
		if ok {
			return wasBound, c.removePodLocked(key, ps)
		}
		return false, nil
	}
	if ok && ps.info.Pod.NodeName == p.NodeName && c.replaceOnNodeLocked(ps, pi) {
		return wasBound, nil
	}
	if ok {
		if err := c.removePodLocked(key, ps); err != nil {
			return wasBound, err
		}
	}
	c.addPodKeyLocked(pi, key, false, c.item(p.NodeName))
	if !ok || ps.info.Pod.NodeName != p.NodeName {
		c.placed.record(pi)
	}
	return wasBound, nil
}

// UpdatePod makes the cache reflect newPod: a terminal pod is removed; a
// bound pod that lost its node (the orchestrator sent it back to pending) is
// removed; an assumed pod is confirmed once newPod carries a node (as by
// AddPod); a bound pod the cache did not have is added. An update without a
// node leaves an assumption alone: it is the pending record changing while
// this replica's binding is still landing. old is accepted for symmetry with
// watch events; the cached state, not old, says where the pod is charged.
func (c *Cache) UpdatePod(old, newPod *framework.Pod) error {
	_ = old
	if newPod.NodeName != "" {
		return c.AddPod(newPod)
	}
	key := newPod.Key()
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[key]
	if !ok || (ps.assumed && !newPod.Phase.Terminal()) {
		return nil
	}
	return c.removePodLocked(key, ps)
}

// RemovePod drops a pod, bound or assumed, from wherever it is charged.
func (c *Cache) RemovePod(p *framework.Pod) error {
	key := p.Key()
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[key]
	if !ok {
		return fmt.Errorf("%w: %s", ErrPodNotFound, key)
	}
	return c.removePodLocked(key, ps)
}

// LookupPod returns the cached pod (bound or assumed) and whether it is
// assumed, as GetPod and IsAssumed would, under one read lock.
func (c *Cache) LookupPod(key string) (p *framework.Pod, assumed, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.pods[key]
	if !ok {
		return nil, false, false
	}
	return ps.info.Pod, ps.assumed, true
}

// GetPod returns the cached pod (bound or assumed).
func (c *Cache) GetPod(key string) (*framework.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.pods[key]
	if !ok {
		return nil, false
	}
	return ps.info.Pod, true
}

// NodeInfo returns a clone of a known node's NodeInfo, for read-only use.
// Node-less NodeInfos (pods only) are not reported.
func (c *Cache) NodeInfo(name string) (*framework.NodeInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	it, ok := c.nodes[name]
	if !ok || it.info.Node() == nil {
		return nil, false
	}
	return it.info.Clone(), true
}

// NodeCount returns the number of known nodes.
func (c *Cache) NodeCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tree.numNodes
}

// PodCount returns the number of cached pods, assumed ones included.
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pods)
}

// AssumedPodCount returns the number of pods assumed and not yet confirmed.
func (c *Cache) AssumedPodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.assumed
}

// Dump is a deep copy of the cache for debugging.
type Dump struct {
	// Nodes holds clones of every NodeInfo, node-less ones included.
	Nodes map[string]*framework.NodeInfo
	// AssumedPods maps each assumed pod to whether FinishBinding was called.
	AssumedPods map[string]bool
}

// Dump copies the whole cache. It is expensive; keep it off hot paths.
func (c *Cache) Dump() *Dump {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d := &Dump{Nodes: make(map[string]*framework.NodeInfo, len(c.nodes)), AssumedPods: map[string]bool{}}
	for name, it := range c.nodes {
		d.Nodes[name] = it.info.Clone()
	}
	for key, ps := range c.pods {
		if ps.assumed {
			d.AssumedPods[key] = ps.bindingFinished.Load()
		}
	}
	return d
}

// UpdateSnapshot brings snap up to date with the cache. Only NodeInfos
// changed since snap's generation are cloned: the recency list is walked from
// the newest change and the walk stops at the first NodeInfo snap already
// has. A changed NodeInfo is copied into snap's existing struct, so the
// node lists (which hold pointers) need rebuilding only when a node joined,
// left or changed zone, or when a node gained or lost its last pod with
// (anti-)affinity.
func (c *Cache) UpdateSnapshot(snap *Snapshot) error {
	c.mu.RLock()
	defer c.mu.RUnlock()

	rebuildAll, rebuildAffinity := false, false
	for it := c.head; it != nil && it.info.Generation > snap.generation; it = it.next {
		n := it.info.Node()
		if n == nil {
			continue // node-less: removed below if snap still has it
		}
		existing, ok := snap.nodeInfoMap[n.Name]
		if !ok {
			rebuildAll = true
			existing = &framework.NodeInfo{}
			snap.nodeInfoMap[n.Name] = existing
		}
		if (len(existing.PodsWithAffinity) > 0) != (len(it.info.PodsWithAffinity) > 0) ||
			(len(existing.PodsWithRequiredAntiAffinity) > 0) != (len(it.info.PodsWithRequiredAntiAffinity) > 0) {
			rebuildAffinity = true
		}
		it.info.CloneInto(existing)
		snap.cloned++
		snap.changes.record(existing)
	}
	if c.head != nil {
		snap.generation = c.head.info.Generation
	}
	snap.changes.trim()

	// A node that left does not show up in the walk above when its NodeInfo
	// was dropped, so compare counts: every name in snap that the cache no
	// longer knows as a node must go.
	if len(snap.nodeInfoMap) > c.tree.numNodes {
		for name := range snap.nodeInfoMap {
			if it, ok := c.nodes[name]; !ok || it.info.Node() == nil {
				delete(snap.nodeInfoMap, name)
			}
		}
		rebuildAll = true
	}

	// The list order also changes when a node leaves and returns, or moves
	// zone, between two updates; the tree's version catches both.
	if snap.treeVersion != c.tree.version {
		rebuildAll = true
	}
	switch {
	case rebuildAll:
		snap.rebuildLists(c.tree.list())
		snap.treeVersion = c.tree.version
		snap.changes.restart(snap.generation)
	case rebuildAffinity:
		snap.rebuildAffinityLists()
	}
	if got := len(snap.nodeInfoList); got != c.tree.numNodes {
		// Should not happen; start the snapshot afresh next time and say so.
		snap.reset()
		return fmt.Errorf("cache: snapshot had %d nodes, cache %d; snapshot reset", got, c.tree.numNodes)
	}
	return nil
}
