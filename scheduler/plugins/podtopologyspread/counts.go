package podtopologyspread

import (
	"context"
	"slices"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
)

// Incremental domain counts. The count memo (memo.go) still looks at every
// node each cycle, only more cheaply; at 100,000 nodes that walk is the
// cost. When the snapshot can list the NodeInfos its updates overwrote
// (framework.NodeChangeLog), the plugin instead keeps, per counting rule, each
// domain's total across cycles and corrects it from the changed nodes
// only, so a cycle costs O(changed nodes + domains).
//
// The totals are exact: a node's contribution is remembered with the
// node, and a changed node's old contribution is taken out before its new
// one goes in. Whenever the catch-up cannot be proven complete (the
// snapshot's node list was rebuilt, the change log no longer reaches back,
// another lister or node list), the rule is recounted from every node.

// maxCounters bounds the counting rules kept: each costs 8 bytes per node.
const maxCounters = 8

// staleAfter is how many uses of the index a rule's totals must go
// unused before another rule takes their slot.
const staleAfter = 2 * maxCounters

// countRule says which nodes count towards which domain and which of
// their pods count: everything a node's contribution depends on besides
// the node. Rules with the same key count the same.
type countRule struct {
	key         string
	sel         *selector
	namespace   string
	topologyKey string
	// required are topology keys a node must carry to be counted at all.
	required []string
	// pod supplies the tolerations for a NodeTaintsPolicy Honor rule; the
	// key holds them, so any pod with that key gives the same answer.
	pod         *framework.Pod
	honorTaints bool
}

// incrementalRule returns the rule counting c's pods for pod, with the
// node keys required, or false when pod's node affinity restricts which
// nodes count: such rules are not kept (the key would have to hold the
// whole affinity).
func incrementalRule(c *constraint, pod *framework.Pod, required []string) (countRule, bool) {
	if c.nodeAffinityPolicy == framework.NodeInclusionPolicyHonor && hasRequiredNodeAffinity(pod) {
		return countRule{}, false
	}
	r := countRule{sel: &c.selector, namespace: pod.Namespace, topologyKey: c.topologyKey, required: required, pod: pod}
	b := make([]byte, 0, 128)
	b = framework.AppendSigString(b, c.selector.signature(pod.Namespace))
	b = framework.AppendSigString(b, c.topologyKey)
	b = framework.AppendSigInt(b, int64(len(required)))
	for _, k := range required {
		b = framework.AppendSigString(b, k)
	}
	if c.nodeTaintsPolicy == framework.NodeInclusionPolicyHonor {
		r.honorTaints = true
		b = append(b, 'T')
		b = framework.AppendSigTolerations(b, pod.Tolerations)
	}
	r.key = string(b)
	return r, true
}

func hasRequiredNodeAffinity(pod *framework.Pod) bool {
	return len(pod.NodeSelector) > 0 || (pod.Affinity != nil && pod.Affinity.NodeAffinity != nil && pod.Affinity.NodeAffinity.Required != nil)
}

// requiredKeys returns the sorted, distinct topology keys of cs.
func requiredKeys(cs []constraint) []string {
	keys := make([]string, 0, len(cs))
	for i := range cs {
		keys = append(keys, cs[i].topologyKey)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// contribution is what a node adds under a rule: count pods to domain
// dom, or nothing when dom is -1.
type contribution struct {
	dom   int32
	count int32
}

// contribute reports whether ni counts under r and, if so, its domain
// and its pods that r selects.
func (r *countRule) contribute(ni *framework.NodeInfo) (value string, pods int32, ok bool) {
	node := ni.Node()
	if node == nil {
		return "", 0, false
	}
	for _, k := range r.required {
		if _, ok := node.Labels[k]; !ok {
			return "", 0, false
		}
	}
	if r.honorTaints {
		if _, untolerated := framework.FindMatchingUntoleratedTaint(node.Taints, r.pod.Tolerations, framework.DoNotScheduleTaint); untolerated {
			return "", 0, false
		}
	}
	// Without the key among the required ones, a node lacking it forms
	// the "" domain, as PreScore has it under system defaults.
	return node.Labels[r.topologyKey], int32(countMatching(ni.Pods, r.sel, r.namespace)), true
}

// of is ni's contribution, its domain interned in t.
func (t *domainTotals) of(r *countRule, ni *framework.NodeInfo) contribution {
	v, n, ok := r.contribute(ni)
	if !ok {
		return contribution{dom: -1}
	}
	return contribution{dom: t.intern(v), count: n}
}

// domainTotals is one rule's state: each node's contribution by position
// in the snapshot list, and per domain the pods and member nodes.
type domainTotals struct {
	key     string
	lastUse uint64
	// kept is the snapshot, list and generation the totals are at.
	kept framework.KeptAt

	perNode []contribution
	values  []string
	byValue map[string]int32
	pods    []int64
	members []int32
	// matches are the pods per domain with a member node, as Filter's
	// state holds them, kept in step for the cycles to copy once built
	// (filterMatches); perCount is nil until then.
	matches domainMatches
}

func (t *domainTotals) intern(v string) int32 {
	id, ok := t.byValue[v]
	if !ok {
		id = int32(len(t.values))
		t.values = append(t.values, v)
		t.byValue[v] = id
		t.pods = append(t.pods, 0)
		t.members = append(t.members, 0)
	}
	return id
}

func (t *domainTotals) add(c contribution, sign int) {
	if c.dom >= 0 {
		t.pods[c.dom] += int64(sign) * int64(c.count)
		t.members[c.dom] += int32(sign)
	}
}

// each calls f for every domain with at least one member node.
func (t *domainTotals) each(f func(value string, pods int64)) {
	for id, n := range t.members {
		if n > 0 {
			f(t.values[id], t.pods[id])
		}
	}
}

// countIndex is the plugin's set of kept totals and the position of each
// NodeInfo in the list they were built for. Like countMemos, it is used
// by one cycle at a time; mu (taken with TryLock) only keeps an
// unexpected concurrent cycle out, which then counts without it.
type countIndex struct {
	mu        sync.Mutex
	tick      uint64
	totals    [maxCounters]*domainTotals
	positions framework.NodePositions
	// recounts and catchUps count how totals were brought up to date,
	// for tests.
	recounts, catchUps int
}

// acquire returns the index for one cycle, or nil if another cycle holds
// it; release must follow.
func (x *countIndex) acquire() *countIndex {
	if !x.mu.TryLock() {
		return nil
	}
	x.tick++
	return x
}

func (x *countIndex) release() { x.mu.Unlock() }

// totalsFor returns r's totals brought up to date with the snapshot src,
// whose node list is all. It returns nil when x is nil or no slot has gone
// unused for staleAfter uses of the index; the caller then counts without
// it.
func (x *countIndex) totalsFor(ctx context.Context, pl *PodTopologySpread, r *countRule, src framework.NodeChangeLog, all []*framework.NodeInfo) *domainTotals {
	if x == nil || len(all) == 0 {
		return nil
	}
	tick := x.tick
	var t, victim *domainTotals
	for i, c := range x.totals {
		if c == nil {
			c = &domainTotals{}
			x.totals[i] = c
		}
		if c.key == r.key && c.byValue != nil {
			t = c
			break
		}
		// A slot is taken over only once unused for a while: with more
		// rules in turn than slots, taking over the least recently used
		// one would recount every cycle, which costs more than counting
		// without the index.
		if (c.key == "" || c.lastUse+staleAfter < tick) && (victim == nil || c.lastUse < victim.lastUse) {
			victim = c
		}
	}
	if t == nil {
		if victim == nil {
			return nil
		}
		t = victim
		*t = domainTotals{key: r.key, perNode: t.perNode[:0]}
	}
	t.lastUse = tick
	gen := src.Generation()
	fresh := t.byValue != nil && len(t.values) <= 2*len(all)+16
	switch {
	case fresh && t.kept.Current(src, all, gen):
	case fresh && x.catchUp(t, r, src, all):
		x.catchUps++
	default:
		x.recounts++
		t.recount(ctx, pl, r, all)
	}
	t.kept.Mark(src, all, gen)
	return t
}

// catchUp replaces the contributions of the nodes changed since t's
// generation; false if the snapshot cannot list them all, and then t
// must be recounted.
func (x *countIndex) catchUp(t *domainTotals, r *countRule, src framework.NodeChangeLog, all []*framework.NodeInfo) bool {
	return t.kept.CatchUp(src, all, &x.positions, func(pos int, ni *framework.NodeInfo) {
		old := t.perNode[pos]
		t.add(old, -1)
		t.perNode[pos] = t.of(r, ni)
		t.add(t.perNode[pos], 1)
		t.syncMatches(old.dom)
		t.syncMatches(t.perNode[pos].dom)
	})
}

// syncMatches brings domain dom's entry in matches up to date.
func (t *domainTotals) syncMatches(dom int32) {
	switch {
	case dom < 0 || t.matches.perCount == nil:
	case t.members[dom] > 0:
		t.matches.set(t.values[dom], int(t.pods[dom]))
	default:
		t.matches.remove(t.values[dom])
	}
}

// recount builds t from every node: pods are counted in parallel, and
// domains interned after, in list order (interning writes a map).
func (t *domainTotals) recount(ctx context.Context, pl *PodTopologySpread, r *countRule, all []*framework.NodeInfo) {
	t.byValue = map[string]int32{}
	t.values, t.pods, t.members = t.values[:0], t.pods[:0], t.members[:0]
	if cap(t.perNode) < len(all) {
		t.perNode = make([]contribution, len(all))
	}
	t.perNode = t.perNode[:len(all)]
	pl.parallelizer.Until(ctx, len(all), func(n int) {
		c := contribution{dom: -1}
		if _, pods, ok := r.contribute(all[n]); ok {
			c = contribution{count: pods}
		}
		t.perNode[n] = c
	})
	if ctx.Err() != nil {
		// Workers may have stopped early: keep nothing.
		t.byValue = nil
		return
	}
	for n, ni := range all {
		c := &t.perNode[n]
		if c.dom < 0 {
			continue
		}
		c.dom = t.intern(ni.Node().Labels[r.topologyKey])
		t.add(*c, 1)
	}
	t.matches = domainMatches{}
}

// filterMatches returns a copy of the counts Filter reads, built on first
// use: rules kept only for scoring never need them.
func (t *domainTotals) filterMatches() domainMatches {
	if t.matches.perCount == nil {
		m := make(map[string]int, len(t.values))
		t.each(func(v string, pods int64) { m[v] = int(pods) })
		t.matches = matchesOf(m)
	}
	t.matches.settle()
	return t.matches.copy()
}

// incrementalTotals returns, for each of cs, the up-to-date totals of
// the rule counting its pods for pod over nodes, or nil when they must be
// counted node by node: nodes is not the snapshot's list, the snapshot
// keeps no change log, a rule cannot be kept, or the cycle was cancelled.
// The totals are valid while idx is held.
func (pl *PodTopologySpread) incrementalTotals(ctx context.Context, idx *countIndex, pod *framework.Pod, cs []constraint, required []string, nodes []*framework.NodeInfo) []*domainTotals {
	src, ok := framework.ChangeLogFor(pl.handle.SnapshotSharedLister(), nodes)
	if !ok {
		return nil
	}
	totals := make([]*domainTotals, len(cs))
	for i := range cs {
		r, ok := incrementalRule(&cs[i], pod, required)
		if !ok {
			return nil
		}
		if totals[i] = idx.totalsFor(ctx, pl, &r, src, nodes); totals[i] == nil || ctx.Err() != nil {
			return nil
		}
	}
	return totals
}
