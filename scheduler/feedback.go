package scheduler

import (
	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/framework"
)

// This file holds the core's side of the orchestrator's feedback: pods
// sent back from their node (RejectBinding) and node records that change
// only in revision.

// podPending applies a pending record. A pod the cache still holds on a
// node, other than as our own assumption, was sent back by that node: it
// leaves the node, whose room may help others, and is queued only after a
// backoff, so a node or image that keeps failing does not get the pod (or
// its siblings) straight back. Another replica's assumption of the pod is
// not a rejection: that charge stays until the assumption goes.
func (s *Scheduler) podPending(p *framework.Pod) {
	sh := s.shardFor(p)
	if !s.OwnsPod(p) {
		s.nominatedElsewhere(p)
	}
	cached, ok := s.cache.GetPod(p.Key())
	if !ok || s.cache.IsAssumed(p.Key()) || s.assumedElsewhere(p) {
		sh.upsertPending(p)
		return
	}
	if err := s.cache.RemovePod(cached); err != nil {
		s.logger.Warn("cache remove of unbound pod failed", zap.String("pod", p.Key()), zap.Error(err))
	} else {
		ev := framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete, Label: "AssignedPodDelete"}
		s.metrics.event(ev.Label)
		s.broadcast(ev, cached, nil)
	}
	if cached.UID != p.UID {
		sh.upsertPending(p) // a new incarnation: nothing to back off from
		return
	}
	sh.upsertPendingAfterBackoff(p, len(p.Rejections))
}

// upsertPendingAfterBackoff is upsertPending for a pod that failed outside
// a scheduling cycle: it enters the queue through backoffQ, charged with
// attempts failed attempts.
func (sh *shard) upsertPendingAfterBackoff(p *framework.Pod, attempts int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.pending[p.Key()] = p
	if _, busy := sh.inFlight[p.Key()]; busy || !sh.s.OwnsPod(p) {
		return
	}
	sh.queue.AddWithBackoff(p, attempts)
}

// UpsertNodeRecord is UpsertNode for a node read from the store. A new
// record that changes nothing a plugin looks at but the revision still
// lifts the rejections pods recorded against the node, so those pods (and
// only those) are offered the event.
func (s *Scheduler) UpsertNodeRecord(n *framework.Node) {
	s.mu.Lock()
	old := s.nodes[n.Name]
	s.mu.Unlock()
	s.UpsertNode(n)
	if old == nil || old.Revision == n.Revision || nodeChange(old, n) != 0 {
		return // UpsertNode sent the event, or there is none
	}
	ev := framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionUpdate, Label: "NodeRecordUpdate"}
	s.metrics.event(ev.Label)
	rejectedHere := func(p *framework.Pod) bool {
		_, ok := p.Rejections[n.Name]
		return ok
	}
	for _, sh := range s.shards {
		sh.queue.MoveAllToActiveOrBackoffQueue(ev, old, n, rejectedHere)
	}
}

// nominatedElsewhere follows the nomination another replica recorded for a
// pod it schedules, as Kubernetes takes nominations from pod status: this
// replica's filters then count the pod on that node, and its preemptions
// do not evict again for room already being freed. This replica's own
// nominations are its own to keep: a record of one may be older than them.
func (s *Scheduler) nominatedElsewhere(p *framework.Pod) {
	if p.NominatedNodeName == "" {
		s.nominator.forget(p)
		return
	}
	if pi, node := s.nominator.lookup(p.Key()); pi != nil && node == p.NominatedNodeName && pi.Pod.UID == p.UID {
		return
	}
	s.nominator.set(framework.NewPodInfo(p), p.NominatedNodeName)
}
