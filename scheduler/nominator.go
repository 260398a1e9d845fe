package scheduler

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
)

// nominator remembers which pods preemption nominated to which node, so
// every shard's filters count them and nobody else takes the room being
// freed. It is shared by all shards: they share the nodes. It also
// remembers the victims each nominated pod waits for, so the pod can be
// retried as soon as the last of them is gone.
//
// Filters ask it once per node in every cycle, on every core at once,
// while nominations change a few times per preemption. So readers take no
// lock at all: each write copies the part of the node -> nominations map
// it changes (see nominationView) and publishes a new view, and each
// node's list is sorted and replaced, never changed in place.
type nominator struct {
	mu sync.Mutex // serializes writers; readers load view
	// view is the published node -> nominations map; never changed once
	// stored. Writers build the next one under mu.
	view   atomic.Pointer[nominationView]
	nodeOf map[string]string // pod key -> node
	// waitingOn maps a nominated pod's key to the keys of its victims not
	// deleted yet; victimOf maps each such victim back. A nomination that
	// moves or ends drops its victims.
	waitingOn map[string]map[string]struct{}
	victimOf  map[string]string
	// count is len(nodeOf), read without the lock: with no nomination
	// anywhere, filters and deletions skip the map altogether.
	count atomic.Int64
	// version counts publications twice (see setLocked), for placers
	// that remember filter results while there is no nomination.
	version atomic.Uint64
	seed    maphash.Seed // of the UID hashes in nominee
}

// nominationView is one published version of the nominations, split into
// buckets by node name hash so that a write copies one bucket, not every
// nominated node: a benchmark with thousands of preemptions in flight spent
// a sixth of all its allocation copying the whole map on each write.
type nominationView struct {
	buckets [nominationBuckets]*nominationBucket // nil: no nomination there
}

const nominationBuckets = 64

type nominationBucket struct {
	byNode map[string]nominations
	// bits has a bit set for the name hash (framework.NodeNameHash) of
	// every node in byNode. Most nodes have no nomination, and the bit
	// tells so without the node's name, which filters would otherwise read
	// for every node of every cycle.
	bits []uint64
}

func newNominationBucket(byNode map[string]nominations) *nominationBucket {
	if len(byNode) == 0 {
		return nil
	}
	// About 16 bits per nominated node: one node in 16 without nominations
	// still has its name looked up.
	words := 1
	for words*64 < 16*len(byNode) {
		words *= 2
	}
	b := &nominationBucket{byNode: byNode, bits: make([]uint64, words)}
	for name := range byNode {
		w, m := b.bit(framework.NodeNameHash(name))
		b.bits[w] |= m
	}
	return b
}

// bit uses the hash bits above those that chose the bucket.
func (b *nominationBucket) bit(h uint64) (word int, mask uint64) {
	x := (h / nominationBuckets) & uint64(len(b.bits)*64-1)
	return int(x / 64), 1 << (x % 64)
}

// mayHave is false only for a node with no nomination; h is its name hash.
func (v *nominationView) mayHave(h uint64) bool {
	b := v.buckets[h%nominationBuckets]
	if b == nil {
		return false
	}
	w, m := b.bit(h)
	return b.bits[w]&m != 0
}

// get returns the nominations of the node ni.
func (v *nominationView) get(ni *framework.NodeInfo) nominations {
	h := ni.NameHash()
	if !v.mayHave(h) {
		return nominations{}
	}
	return v.buckets[h%nominationBuckets].byNode[ni.Name()]
}

// lookup returns the nominations of the named node.
func (v *nominationView) lookup(node string) nominations {
	if b := v.buckets[framework.NodeNameHash(node)%nominationBuckets]; b != nil {
		return b.byNode[node]
	}
	return nominations{}
}

// nodes counts the nodes with nominations.
func (v *nominationView) nodes() int {
	n := 0
	for _, b := range v.buckets {
		if b != nil {
			n += len(b.byNode)
		}
	}
	return n
}

// nominationEdit builds the next view from one, copying only the buckets
// it changes.
type nominationEdit struct {
	next    nominationView
	changed [nominationBuckets]map[string]nominations
}

// bucket returns the editable copy of node's bucket.
func (e *nominationEdit) bucket(node string) map[string]nominations {
	i := framework.NodeNameHash(node) % nominationBuckets
	if e.changed[i] == nil {
		if b := e.next.buckets[i]; b != nil {
			e.changed[i] = maps.Clone(b.byNode)
		} else {
			e.changed[i] = map[string]nominations{}
		}
	}
	return e.changed[i]
}

func (e *nominationEdit) publish() *nominationView {
	for i, m := range e.changed {
		if m != nil {
			e.next.buckets[i] = newNominationBucket(m)
		}
	}
	v := e.next
	return &v
}

func newNominationView(byNode map[string]nominations) *nominationView {
	var e nominationEdit
	for name, ns := range byNode {
		e.bucket(name)[name] = ns
	}
	return e.publish()
}

// nominations are the pods nominated to one node, by key. Both slices
// are replaced, never changed in place.
type nominations struct {
	pods []*framework.PodInfo
	// who[i] is what decides whether pods[i] counts against another pod,
	// kept beside the list so deciding reads no pod.
	who []nominee
	// overlays remembers the node with all of pods added, for filters.
	overlays *fwruntime.NominatedOverlays
}

type nominee struct {
	priority int32
	uid      uint64 // hash of the UID
}

func (n *nominator) uidHash(uid string) uint64 { return maphash.String(n.seed, uid) }

// with returns a copy of ns holding pi, whose key is key, in key order.
func (ns nominations) with(key string, pi *framework.PodInfo, w nominee) nominations {
	i, _ := slices.BinarySearchFunc(ns.pods, key, byKey)
	return nominations{pods: slices.Insert(slices.Clip(ns.pods), i, pi), who: slices.Insert(slices.Clip(ns.who), i, w),
		overlays: new(fwruntime.NominatedOverlays)}
}

// without returns a copy of ns without the pod whose key is key.
func (ns nominations) without(key string) nominations {
	i, found := slices.BinarySearchFunc(ns.pods, key, byKey)
	if !found {
		return ns
	}
	return nominations{pods: slices.Delete(slices.Clone(ns.pods), i, i+1), who: slices.Delete(slices.Clone(ns.who), i, i+1),
		overlays: new(fwruntime.NominatedOverlays)}
}

var (
	_ framework.PodNominator         = (*nominator)(nil)
	_ fwruntime.CountingPodNominator = (*nominator)(nil)
)

func newNominator() *nominator {
	n := &nominator{
		nodeOf:    map[string]string{},
		waitingOn: map[string]map[string]struct{}{},
		victimOf:  map[string]string{},
		seed:      maphash.MakeSeed(),
	}
	n.view.Store(newNominationView(map[string]nominations{}))
	return n
}

// NominatedPodsForNode implements framework.PodNominator. The pods come in
// key order, as filters add them in order; the slice is shared and must
// not be changed.
func (n *nominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	if n.count.Load() == 0 {
		return nil
	}
	return n.view.Load().lookup(node).pods
}

// NominatedPodsAgainst implements fwruntime.CountingPodNominator. When
// every pod counts, which is the common case, the shared list is returned.
func (n *nominator) NominatedPodsAgainst(node *framework.NodeInfo, pod *framework.Pod) ([]*framework.PodInfo, *fwruntime.NominatedOverlays) {
	if n.count.Load() == 0 {
		return nil, nil
	}
	ns := n.view.Load().get(node)
	var uid uint64
	hashed := false
	counts := func(i int) bool {
		if ns.who[i].priority < pod.Priority {
			return false
		}
		if !hashed {
			uid, hashed = n.uidHash(pod.UID), true
		}
		// Equal hashes are most likely the pod itself: compare UIDs.
		return ns.who[i].uid != uid || ns.pods[i].Pod.UID != pod.UID
	}
	for i := range ns.pods {
		if counts(i) {
			continue
		}
		// Some pod does not count: copy those that do.
		var out []*framework.PodInfo
		for j := range ns.pods {
			if j != i && (j < i || counts(j)) {
				out = append(out, ns.pods[j])
			}
		}
		return out, nil
	}
	return ns.pods, ns.overlays
}

// set nominates pi to node, replacing any earlier nomination; node ""
// clears it. The victims it waits for are kept only if the node is the
// same.
func (n *nominator) set(pi *framework.PodInfo, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setLocked(pi.Pod.Key(), pi, node)
}

// nominate is set for a preemption that evicts victims from node: pi waits
// for them, replacing any victims it waited for before.
func (n *nominator) nominate(pi *framework.PodInfo, node string, victims []*framework.Pod) {
	key := pi.Pod.Key()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setLocked(key, pi, node)
	n.dropVictimsLocked(key)
	if len(victims) == 0 {
		return
	}
	waiting := make(map[string]struct{}, len(victims))
	for _, v := range victims {
		vk := v.Key()
		if other, ok := n.victimOf[vk]; ok {
			// Evicted before for another pod: this one waits for it now.
			delete(n.waitingOn[other], vk)
		}
		waiting[vk] = struct{}{}
		n.victimOf[vk] = key
	}
	n.waitingOn[key] = waiting
}

func (n *nominator) setLocked(key string, pi *framework.PodInfo, node string) {
	old, had := n.nodeOf[key]
	if !had && node == "" {
		return
	}
	edit := nominationEdit{next: *n.view.Load()}
	if had {
		was := edit.bucket(old)
		if ns := was[old].without(key); len(ns.pods) == 0 {
			delete(was, old)
		} else {
			was[old] = ns
		}
		delete(n.nodeOf, key)
		if old != node {
			n.dropVictimsLocked(key)
		}
	}
	if node != "" {
		is := edit.bucket(node)
		is[node] = is[node].with(key, pi, nominee{priority: pi.Pod.Priority, uid: n.uidHash(pi.Pod.UID)})
		n.nodeOf[key] = node
	}
	// Odd while publishing, so a reader that saw no change across a
	// cycle knows no filter of the cycle saw one half made.
	n.version.Add(1)
	n.view.Store(edit.publish())
	n.count.Store(int64(len(n.nodeOf)))
	n.version.Add(1)
}

var _ fwruntime.VersionedPodNominator = (*nominator)(nil)

// NominationsVersion implements fwruntime.VersionedPodNominator.
func (n *nominator) NominationsVersion() (version uint64, none bool) {
	version = n.version.Load()
	return version, n.count.Load() == 0
}

func (n *nominator) dropVictimsLocked(key string) {
	for vk := range n.waitingOn[key] {
		delete(n.victimOf, vk)
	}
	delete(n.waitingOn, key)
}

func byKey(pi *framework.PodInfo, key string) int { return strings.Compare(pi.Pod.Key(), key) }

// forget clears the pod's nomination, if any.
func (n *nominator) forget(p *framework.Pod) {
	if n.count.Load() == 0 {
		return // nothing to forget; spares the key on every bind
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setLocked(p.Key(), nil, "")
}

// victimGone notes that p, deleted, no longer holds its node. If it was
// the last victim a nominated pod waited for, that pod is returned.
func (n *nominator) victimGone(p *framework.Pod) *framework.Pod {
	if n.count.Load() == 0 {
		return nil
	}
	vk := p.Key()
	n.mu.Lock()
	defer n.mu.Unlock()
	key, ok := n.victimOf[vk]
	if !ok {
		return nil
	}
	delete(n.victimOf, vk)
	waiting := n.waitingOn[key]
	delete(waiting, vk)
	if len(waiting) > 0 {
		return nil
	}
	delete(n.waitingOn, key)
	pi, _ := n.lookupLocked(key)
	if pi == nil {
		return nil
	}
	return pi.Pod
}

// restore puts back the nomination lookup returned for p before a
// preemption that failed: prev on prevNode, or none.
func (n *nominator) restore(p *framework.Pod, prev *framework.PodInfo, prevNode string) {
	if prev != nil {
		n.set(prev, prevNode)
	} else {
		n.forget(p)
	}
}

// lookup returns the pod's nomination, if any: the recorded pod and node.
func (n *nominator) lookup(key string) (*framework.PodInfo, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lookupLocked(key)
}

func (n *nominator) lookupLocked(key string) (*framework.PodInfo, string) {
	node, ok := n.nodeOf[key]
	if !ok {
		return nil, ""
	}
	pods := n.view.Load().lookup(node).pods
	i, _ := slices.BinarySearchFunc(pods, key, byKey)
	return pods[i], node
}
