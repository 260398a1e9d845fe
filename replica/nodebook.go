package replica

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// nodeBook is what the bridge knows of each node beyond what the core
// holds: the wire record with its mod revision, and whether its lease key
// exists, from which the core's node is rebuilt when only the lease changes.
// Only the sync goroutine touches it.
//
// Why a replica holds a node in three places: this book keeps the wire
// record (a pointer to the message the watch decoded, not a copy) because
// the core's node has the lease folded in as an unreachable taint, and a
// renewed lease must rebuild the node without it; the scheduler keeps the
// last core node it was given (Scheduler.nodes) to tell which cluster event
// a new record is, for requeueing; the cache keeps a NodeInfo, which adds
// what the node's pods request and is what snapshots copy. Each serves a
// different reader; the scheduler's node shares its label and allocatable
// maps with the wire record, and only the cache's is copied per snapshot,
// for the nodes that changed.
type nodeBook struct {
	records map[string]nodeRecord
	leased  map[string]bool
	// listed holds the nodes' mod revisions from the last listing, for
	// the Reset that follows it.
	listed map[string]int64
}

type nodeRecord struct {
	node *berthv1.Node
	rev  int64
}

func (b *nodeBook) init() {
	if b.records == nil {
		b.records, b.leased = map[string]nodeRecord{}, map[string]bool{}
	}
}

// unreachable: the node asks for a lease and has none.
func (b *nodeBook) unreachable(name string) bool {
	r, ok := b.records[name]
	return ok && b.lapsed(name, r)
}

// lapsed is unreachable for r, the record of node name.
func (b *nodeBook) lapsed(name string, r nodeRecord) bool {
	return r.node.GetLeaseTtlSeconds() > 0 && !b.leased[name]
}

// anyUnreachable reports whether any node is unreachable.
func (b *nodeBook) anyUnreachable() bool {
	for name, r := range b.records {
		if b.lapsed(name, r) {
			return true
		}
	}
	return false
}

func (b *nodeBook) forget(name string) { delete(b.records, name) }

// put records a node and returns the core's view of it.
func (b *nodeBook) put(n *berthv1.Node, rev int64) *framework.Node {
	b.init()
	b.records[n.GetName()] = nodeRecord{node: n, rev: rev}
	return convert.NodeToCore(n, rev, b.unreachable(n.GetName()))
}

// NodeLeasesReset implements store.NodeLeaseHandler; Reset follows.
func (s *bridge) NodeLeasesReset(leased []string, nodeRevisions map[string]int64) {
	s.nodes = nodeBook{listed: nodeRevisions}
	s.nodes.init()
	for _, name := range leased {
		s.nodes.leased[name] = true
	}
}

// NodeLeasePut implements store.NodeLeaseHandler: a lease started or was
// restored. When it starts with the node's record it comes first, so the
// record finds it.
func (s *bridge) NodeLeasePut(name string, rev int64) {
	s.nodes.init()
	was := s.nodes.unreachable(name)
	s.nodes.leased[name] = true
	if was {
		r := s.nodes.records[name]
		s.sched.UpsertNodeRecord(convert.NodeToCore(r.node, r.rev, false))
	}
	s.revision(rev)
}

// NodeLeaseDeleted implements store.NodeLeaseHandler. Unless the node's
// record was written at the same revision (the lease dropped with it, which
// the record's NodePut already applied), the lease expired: the node turns
// unreachable, and the pods on it are reported lost.
func (s *bridge) NodeLeaseDeleted(name string, rev int64) {
	s.nodes.init()
	delete(s.nodes.leased, name)
	if r, ok := s.nodes.records[name]; ok && r.rev != rev && s.nodes.unreachable(name) {
		s.sched.UpsertNodeRecord(convert.NodeToCore(r.node, r.rev, true))
		s.markLost(name, s.podsOn(name))
	}
	s.revision(rev)
}

// podsOn lists the pods the core holds bound to a node.
func (s *bridge) podsOn(node string) []*framework.Pod {
	ni, ok := s.sched.NodeInfo(node)
	if !ok {
		return nil
	}
	var out []*framework.Pod
	for _, pi := range ni.Pods {
		out = append(out, pi.Pod)
	}
	return out
}

// checkLost reports pods bound to a node that is already unreachable: found
// so at a listing, bound after the lease expired (an assumption whose
// commit landed late), or declared there.
func (s *bridge) checkLost(pods ...*framework.Pod) {
	for node, ps := range s.lostByNode(pods) {
		s.markLost(node, ps)
	}
}

// lostByNode returns those of pods bound to an unreachable node, by node.
func (s *bridge) lostByNode(pods []*framework.Pod) map[string][]*framework.Pod {
	if len(pods) > len(s.nodes.records) && !s.nodes.anyUnreachable() {
		// A listing: many more pods than nodes, and seldom a node down.
		// Asking each node once instead of each pod's spared a restart of
		// 1,000,000 pods half a CPU-second of map reads.
		return nil
	}
	var byNode map[string][]*framework.Pod
	for _, p := range pods {
		if p.NodeName != "" && s.nodes.unreachable(p.NodeName) {
			if byNode == nil {
				byNode = map[string][]*framework.Pod{}
			}
			byNode[p.NodeName] = append(byNode[p.NodeName], p)
		}
	}
	return byNode
}

// markLost sets status.node_lost on those of pods that this replica owns
// and that hold node (bound or running there), in the background. Each
// write compares the pod's mod revision, so it lands once whichever
// replica or retry makes it; a pod changed since is read and judged again.
// The marks stay when the lease is renewed: the orchestrator decides what
// a lost pod's fate is.
func (s *bridge) markLost(node string, pods []*framework.Pod) {
	var updates []store.PodUpdate
	// unread are bound pods, whose records the core does not keep
	// (convert.StoredPodToCore): they are read in the background.
	var unread []*framework.Pod
	for _, p := range pods {
		if !s.sched.OwnsPod(p) {
			continue
		}
		// An assumption's record is still pending: MarkNodeLost leaves it.
		next, err := sourceOf(p)
		if errors.Is(err, convert.ErrNoRecord) {
			unread = append(unread, p)
			continue
		}
		if err != nil || !store.MarkNodeLost(next, node) {
			continue
		}
		updates = append(updates, store.PodUpdate{Pod: next, ExpectedModRevision: p.Revision})
	}
	if len(updates)+len(unread) == 0 || s.store == nil {
		return
	}
	s.marking.Add(1)
	go func() {
		defer s.marking.Done()
		ctx := s.ctx
		for _, p := range unread {
			cur, rev, err := s.store.GetPod(ctx, p.Namespace, p.Name)
			if err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
				s.logger().Warn("read pod to mark node_lost", zap.String("pod", p.Key()), zap.String("node", node), zap.Error(err))
			}
			if err != nil || cur.GetUid() != p.UID || !store.MarkNodeLost(cur, node) {
				continue // gone, replaced, or nothing to mark
			}
			updates = append(updates, store.PodUpdate{Pod: cur, ExpectedModRevision: rev})
		}
		if len(updates) == 0 {
			return
		}
		for i, res := range s.store.UpdatePods(ctx, updates) {
			p := updates[i].Pod
			if errors.Is(res.Err, store.ErrConflict) {
				_, _, res.Err = s.store.ModifyPod(ctx, p.GetNamespace(), p.GetName(), p.GetUid(), func(cur *berthv1.Pod) (bool, error) {
					return store.MarkNodeLost(cur, node), nil
				})
			}
			if res.Err != nil && !errors.Is(res.Err, store.ErrNotFound) && !errors.Is(res.Err, store.ErrConflict) && ctx.Err() == nil {
				s.logger().Warn("mark pod node_lost", zap.String("pod", p.GetNamespace()+"/"+p.GetName()), zap.String("node", node), zap.Error(res.Err))
			}
		}
	}()
}

func (s *bridge) logger() *zap.Logger {
	if s.log == nil {
		return zap.NewNop()
	}
	return s.log
}

// waitMarking waits for node_lost writes under way (they end with the
// bridge's context).
func (s *bridge) waitMarking() { s.marking.Wait() }

// bridgeLeaseState is embedded in bridge: the node book and what marking
// pods lost needs.
type bridgeLeaseState struct {
	nodes nodeBook
	// store, ctx and log serve markLost; a bridge without store marks
	// nothing.
	store   *store.Store
	ctx     context.Context
	log     *zap.Logger
	marking sync.WaitGroup
}
