package scheduler

import (
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/framework"
)

// This file is the core's way in: every stored change of a node or a pod
// (from the watch, or a fresh listing) reaches the cache and the shards'
// queues here, and wakes the pods it may help. A pending pod the cache
// still holds on a node was sent back by that node (RejectBinding).

// UpsertNode adds or replaces a node and wakes the pods it may help.
func (s *Scheduler) UpsertNode(n *framework.Node) {
	s.mu.Lock()
	old := s.nodes[n.Name]
	s.nodes[n.Name] = n
	s.mu.Unlock()
	s.cache.AddNode(n)
	ev := framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd, Label: "NodeAdd"}
	if old != nil {
		ev = framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: nodeChange(old, n), Label: "NodeUpdate"}
		if ev.ActionType == 0 {
			return
		}
	}
	s.metrics.event(ev.Label)
	s.broadcast(ev, old, n)
}

// nodeChange classifies a node update so only the pods whose failing
// plugins care about it are retried.
func nodeChange(old, n *framework.Node) framework.ActionType {
	var a framework.ActionType
	if !maps.Equal(old.Allocatable, n.Allocatable) {
		a |= framework.ActionUpdateNodeAllocatable
	}
	if !maps.Equal(old.Labels, n.Labels) {
		a |= framework.ActionUpdateNodeLabel
	}
	if !slices.Equal(old.Taints, n.Taints) || old.Unschedulable != n.Unschedulable {
		a |= framework.ActionUpdateNodeTaint
	}
	if len(old.Images) != len(n.Images) {
		a |= framework.ActionUpdateNodeCondition
	}
	return a
}

// DeleteNode forgets a node. Pods bound to it stay charged until deleted.
func (s *Scheduler) DeleteNode(name string) {
	s.mu.Lock()
	old := s.nodes[name]
	delete(s.nodes, name)
	s.mu.Unlock()
	s.cache.RemoveNode(name)
	ev := framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionDelete, Label: "NodeDelete"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, old, nil)
}

// UpsertPod applies the latest stored state of a pod.
func (s *Scheduler) UpsertPod(p *framework.Pod) {
	defer s.observeMember(p) // last: a finished member is dropped, then kept as finished
	switch {
	case p.Phase.Terminal():
		s.DeletePod(p)
	case p.NodeName != "":
		s.podBound(p)
	default:
		s.podPending(p) // a pod may come back from its node
	}
}

// podBound records a pod placed on a node: confirms our own assumption or
// charges a pod bound elsewhere (another replica, or declared running).
func (s *Scheduler) podBound(p *framework.Pod) {
	key := p.Key()
	s.forgetForeign(p) // its charge, if any, becomes the binding below
	s.shardFor(p).forgetPending(key)
	s.nominator.forget(p)
	wasBound, err := s.cache.AddBoundPod(p)
	if err != nil {
		s.logger.Warn("cache add of bound pod failed", zap.String("pod", key), zap.Bool("was_bound", wasBound), zap.Error(err))
	}
	if wasBound {
		return // an update of a pod already placed, not a placement
	}
	// A pod newly on a node can satisfy affinity or spreading that failed
	// before; only pods rejected by plugins that registered this event are
	// looked at.
	ev := framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionAdd, Label: "AssignedPodAdd"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, nil, p)
}

// DeletePod removes a pod, from the queue or from its node, and wakes the
// pods its room may help.
func (s *Scheduler) DeletePod(p *framework.Pod) {
	s.forgetForeign(p) // its charge, if any, is removed below
	key := p.Key()
	s.groups.forget(p)
	// The store may know a deleted pod by its name alone, and a gang
	// member's shard loop follows its group, not its name: every loop
	// is told (there are as many as cores).
	for _, sh := range s.shards {
		sh.forgetPending(key)
	}
	s.nominator.forget(p)
	cached, ok := s.cache.GetPod(key)
	if !ok || (p.UID != "" && cached.UID != p.UID) {
		return
	}
	if err := s.cache.RemovePod(cached); err != nil {
		s.logger.Warn("cache remove failed", zap.String("pod", p.Key()), zap.Error(err))
		return
	}
	ev := framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete, Label: "AssignedPodDelete"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, cached, nil)
	s.victimGone(cached) // preemption.go
}

// Reset replaces everything the scheduler knows with a fresh listing, as
// after a restart or a watch that fell behind compaction. The first, into
// an empty scheduler, is loaded in bulk (reset.go).
func (s *Scheduler) Reset(nodes []*framework.Node, pods []*framework.Pod) {
	if s.isEmpty() {
		s.loadEmpty(nodes, pods)
		s.logger.Info("scheduler state loaded", zap.Int("nodes", len(nodes)), zap.Int("pods", len(pods)), zap.Bool("bulk", true))
		return
	}
	s.groups.resetMembers()
	s.mu.Lock()
	stale := s.nodes
	s.nodes = map[string]*framework.Node{}
	s.mu.Unlock()
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n.Name] = true
	}
	for name := range stale {
		if !live[name] {
			s.DeleteNode(name)
		}
	}
	for _, n := range nodes {
		s.UpsertNode(n)
	}
	for _, p := range pods {
		s.UpsertPod(p)
	}
	s.logger.Info("scheduler state loaded", zap.Int("nodes", len(nodes)), zap.Int("pods", len(pods)))
}

func (s *Scheduler) broadcast(ev framework.ClusterEvent, oldObj, newObj any) {
	for _, sh := range s.shards {
		sh.queue.MoveAllToActiveOrBackoffQueue(ev, oldObj, newObj, nil)
	}
}

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
	key := p.Key()
	cached, assumed, ok := s.cache.LookupPod(key)
	if !ok || assumed || s.assumedElsewhere(p) {
		sh.upsertPending(key, p)
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
		sh.upsertPending(key, p) // a new incarnation: nothing to back off from
		return
	}
	sh.upsertPendingAfterBackoff(p, len(p.Rejections()))
}

// upsertPendingAfterBackoff is upsertPending for a pod that failed outside
// a scheduling cycle: it enters the queue through backoffQ, charged with
// attempts failed attempts.
func (sh *shard) upsertPendingAfterBackoff(p *framework.Pod, attempts int) {
	sh.lock()
	defer sh.unlock()
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
		_, ok := p.Rejections()[n.Name]
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
	if p.NominatedNodeName() == "" {
		s.nominator.forget(p)
		return
	}
	if pi, node := s.nominator.lookup(p.Key()); pi != nil && node == p.NominatedNodeName() && pi.Pod.UID == p.UID {
		return
	}
	s.nominator.set(framework.NewPodInfo(p), p.NominatedNodeName())
}
