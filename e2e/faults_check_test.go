package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Violation kinds, as printed.
const (
	vLostPod      = "lost_pod"        // acknowledged, not deleted, absent at the end
	vBoundTwice   = "bound_twice"     // one uid bound again after its binding
	vTwoNodes     = "bound_two_nodes" // one uid bound to a second node
	vOvercommit   = "overcommit"      // a node's bound requests exceed its allocatable
	vGangPartial  = "gang_partial"    // 0 < bound members < min_member
	vWatchMissed  = "watch_missed"    // a binding in etcd never seen on the watch
	vWatchDup     = "watch_duplicate" // a binding seen more than once
	vWatchUnknown = "watch_unknown"   // a BOUND event with no binding in etcd
	vWatchOrder   = "watch_out_of_order"
	vNotBound     = "not_bound_at_end" // alive pods still unbound once the faults stopped
	vUncleanStop  = "unclean_stop"     // a replica's graceful stop did not exit 0
)

// binding is one transition of a pod into holding a node, read from etcd.
type binding struct {
	key, uid, node, by string
	rev                int64
}

// history is what a scan of etcd's whole history found.
type history struct {
	revisions int   // distinct revisions with events under the prefix
	events    int   // etcd events read
	endRev    int64 // last revision read
	bindings  []binding
	final     map[string]*berthv1.Pod // "namespace/name" -> pod at endRev
	// byReplica counts bindings by scheduled_by.
	byReplica map[string]int
	shardPuts int // writes of shard ownership keys
	v         *violations
}

// violations counts problems by kind and keeps a few examples of each.
type violations struct {
	count    map[string]int
	examples map[string][]string
}

func newViolations() *violations {
	return &violations{count: map[string]int{}, examples: map[string][]string{}}
}

func (v *violations) add(kind, format string, args ...any) {
	v.count[kind]++
	if len(v.examples[kind]) < 5 {
		v.examples[kind] = append(v.examples[kind], fmt.Sprintf(format, args...))
	}
}

func (v *violations) total() int {
	n := 0
	for _, c := range v.count {
		n += c
	}
	return n
}

func (v *violations) String() string {
	if v.total() == 0 {
		return "none"
	}
	var kinds []string
	for k := range v.count {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "\n  %s: %d", k, v.count[k])
		for _, ex := range v.examples[k] {
			fmt.Fprintf(&b, "\n    e.g. %s", ex)
		}
	}
	return b.String()
}

// holds tells whether a pod occupies its node: it has one and is BOUND or
// RUNNING (terminal pods have freed it).
func holds(p *berthv1.Pod) bool {
	if p == nil || p.GetNodeName() == "" {
		return false
	}
	ph := p.GetStatus().GetPhase()
	return ph == berthv1.PodPhase_POD_PHASE_BOUND || ph == berthv1.PodPhase_POD_PHASE_RUNNING
}

// requests is what a pod takes from its node, as kube-scheduler counts it:
// containers summed, each init container's need as a floor, plus overhead,
// plus one "pods".
func requests(p *berthv1.Pod) map[string]int64 {
	out := map[string]int64{"pods": 1}
	for _, c := range p.GetContainers() {
		for r, v := range c.GetRequests() {
			out[r] += v
		}
	}
	for _, c := range p.GetInitContainers() {
		for r, v := range c.GetRequests() {
			out[r] = max(out[r], v)
		}
	}
	for r, v := range p.GetOverhead() {
		out[r] += v
	}
	return out
}

// scanHistory reads every event under prefix from revision 1 through the
// write of endKey, replaying pods and nodes to check, at every revision,
// that no node is overcommitted and no gang is partly bound, and, per
// binding, that no uid is bound twice. groups maps "namespace/group" to
// min_member.
func scanHistory(ctx context.Context, c *clientv3.Client, prefix, endKey string, groups map[string]int32) (*history, error) {
	h := &history{final: map[string]*berthv1.Pod{}, byReplica: map[string]int{}, v: newViolations()}
	nodesP, podsP, shardsP := prefix+"/v1/nodes/", prefix+"/v1/pods/", prefix+"/v1/shards/"
	alloc := map[string]map[string]int64{}
	used := map[string]map[string]int64{}
	groupBound := map[string]int32{}
	boundUID := map[string]binding{} // uid -> its first binding
	dirtyNodes, dirtyGroups := map[string]bool{}, map[string]bool{}
	onNode := map[string]map[string]binding{} // node -> pods holding it, for reports
	var cur int64

	finish := func(rev int64) {
		for n := range dirtyNodes {
			a, ok := alloc[n]
			if !ok {
				continue // not registered (or deleted): nothing to hold it to
			}
			for r, u := range used[n] {
				if limit, has := a[r]; (has && u > limit) || (!has && u > 0 && r != "pods") {
					h.v.add(vOvercommit, "node %s at revision %d: %s requested %d of %d; %s", n, rev, r, u, limit, describeNode(onNode[n]))
				}
			}
		}
		for g := range dirtyGroups {
			if minMember, ok := groups[g]; ok && groupBound[g] > 0 && groupBound[g] < minMember {
				h.v.add(vGangPartial, "group %s at revision %d: %d bound of min %d", g, rev, groupBound[g], minMember)
			}
		}
		clear(dirtyNodes)
		clear(dirtyGroups)
		h.revisions++
	}
	var rev int64 // of the event being applied
	take := func(p *berthv1.Pod, sign int64) {
		n := p.GetNodeName()
		if used[n] == nil {
			used[n] = map[string]int64{}
		}
		for r, v := range requests(p) {
			used[n][r] += sign * v
		}
		dirtyNodes[n] = true
		if onNode[n] == nil {
			onNode[n] = map[string]binding{}
		}
		pk := p.GetNamespace() + "/" + p.GetName()
		if sign > 0 {
			onNode[n][pk] = binding{key: pk, uid: p.GetUid(), node: n, by: p.GetStatus().GetScheduledBy(), rev: rev}
		} else {
			delete(onNode[n], pk)
		}
		if g := p.GetPodGroup(); g != "" {
			gk := p.GetNamespace() + "/" + g
			groupBound[gk] += int32(sign)
			dirtyGroups[gk] = true
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range c.Watch(wctx, prefix+"/v1/", clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := resp.Err(); err != nil {
			return nil, fmt.Errorf("history watch: %w", err)
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			rev = ev.Kv.ModRevision
			if rev != cur {
				if cur != 0 {
					finish(cur)
				}
				cur = rev
			}
			h.events++
			switch {
			case key == endKey:
				finish(cur)
				h.endRev = cur
				return h, nil
			case strings.HasPrefix(key, shardsP):
				if ev.Type == clientv3.EventTypePut {
					h.shardPuts++
				}
			case strings.HasPrefix(key, nodesP):
				name := strings.TrimPrefix(key, nodesP)
				if ev.Type == clientv3.EventTypeDelete {
					delete(alloc, name)
					continue
				}
				var n berthv1.Node
				if err := proto.Unmarshal(ev.Kv.Value, &n); err != nil {
					return nil, fmt.Errorf("decode node %s at %d: %w", key, rev, err)
				}
				alloc[name] = n.GetAllocatable()
				dirtyNodes[name] = true
			case strings.HasPrefix(key, podsP):
				pk := strings.TrimPrefix(key, podsP)
				prev := h.final[pk]
				var now *berthv1.Pod
				if ev.Type == clientv3.EventTypePut {
					now = &berthv1.Pod{}
					if err := proto.Unmarshal(ev.Kv.Value, now); err != nil {
						return nil, fmt.Errorf("decode pod %s at %d: %w", key, rev, err)
					}
					h.final[pk] = now
				} else {
					delete(h.final, pk)
				}
				ph, nh := holds(prev), holds(now)
				if ph && nh && prev.GetNodeName() == now.GetNodeName() && prev.GetUid() == now.GetUid() {
					continue // still where it was (e.g. RUNNING, or marked for eviction)
				}
				if ph {
					take(prev, -1)
				}
				if !nh {
					continue
				}
				take(now, +1)
				b := binding{key: pk, uid: now.GetUid(), node: now.GetNodeName(), by: now.GetStatus().GetScheduledBy(), rev: rev}
				if first, ok := boundUID[b.uid]; ok {
					kind := vBoundTwice
					if first.node != b.node {
						kind = vTwoNodes
					}
					h.v.add(kind, "%s uid %s: bound to %s at %d, again to %s at %d", pk, b.uid, first.node, first.rev, b.node, rev)
				} else {
					boundUID[b.uid] = b
				}
				h.bindings = append(h.bindings, b)
				h.byReplica[b.by]++
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("history watch ended before %s", endKey)
}

// describeNode summarises who bound the pods on a node and the latest
// bindings, to tell a fence failure from a stale cache.
func describeNode(pods map[string]binding) string {
	by := map[string]int{}
	var bs []binding
	for _, b := range pods {
		by[b.by]++
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].rev > bs[j].rev })
	var last []string
	for _, b := range bs[:min(len(bs), 4)] {
		last = append(last, fmt.Sprintf("%s by %s at %d", b.key, b.by, b.rev))
	}
	return fmt.Sprintf("%d pods, by replica %v; latest: %s", len(pods), by, strings.Join(last, ", "))
}

// checkAlive reports every acknowledged, not deleted pod missing (or with
// another uid) at the end.
func checkAlive(h *history, alive map[string]string) {
	for key, uid := range alive {
		p, ok := h.final[key]
		switch {
		case !ok:
			h.v.add(vLostPod, "%s (uid %s) acknowledged, never deleted, absent", key, uid)
		case p.GetUid() != uid:
			h.v.add(vLostPod, "%s has uid %s, acknowledged as %s", key, p.GetUid(), uid)
		}
	}
}

// checkWatch compares the BOUND events the watcher saw after from with
// the bindings in etcd: each exactly once, with its node, in revision order.
func checkWatch(h *history, evs []*berthv1.BindingEvent, from int64) (bound int) {
	type id struct {
		uid string
		rev int64
	}
	want := map[id]binding{}
	for _, b := range h.bindings {
		if b.rev > from {
			want[id{b.uid, b.rev}] = b
		}
	}
	seen := map[id]int{}
	var last int64
	for _, ev := range evs {
		if ev.GetRevision() < last {
			h.v.add(vWatchOrder, "%s/%s %s at revision %d after %d", ev.GetNamespace(), ev.GetName(), ev.GetType(), ev.GetRevision(), last)
		}
		last = max(last, ev.GetRevision())
		if ev.GetType() != berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
			continue
		}
		bound++
		k := id{ev.GetUid(), ev.GetRevision()}
		seen[k]++
		b, ok := want[k]
		switch {
		case !ok:
			h.v.add(vWatchUnknown, "%s/%s uid %s on %s at revision %d", ev.GetNamespace(), ev.GetName(), ev.GetUid(), ev.GetNodeName(), ev.GetRevision())
		case seen[k] == 2:
			h.v.add(vWatchDup, "%s uid %s at revision %d", b.key, b.uid, b.rev)
		case b.node != ev.GetNodeName():
			h.v.add(vWatchUnknown, "%s uid %s at revision %d: watch says %s, etcd %s", b.key, b.uid, b.rev, ev.GetNodeName(), b.node)
		}
	}
	for k, b := range want {
		if seen[k] == 0 {
			h.v.add(vWatchMissed, "%s uid %s on %s at revision %d", b.key, b.uid, b.node, b.rev)
		}
	}
	return bound
}
