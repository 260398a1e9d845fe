package scheduler

import (
	"sync"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/framework"
)

// Other replicas' assumptions (gang members waiting at Permit) hold room
// on their nodes as surely as bindings do, yet their pods are still
// PENDING in the store. So that this replica does not fill that room, each
// one is charged to the cache as a copy of the pending pod placed on the
// assumed node, until the assumption goes (released, or lost with its
// replica's lease) or the pod is bound (the cache then turns the charge
// into the binding) or deleted.

// foreignSet is the pods charged to the cache for other replicas'
// assumptions.
type foreignSet struct {
	mu   sync.Mutex
	pods map[string]foreignCharge // pod key -> what was charged
}

type foreignCharge struct{ uid, node string }

// AssumedElsewhere charges the room another replica's assumption holds:
// pod namespace/name (uid) waits on node. A pod this cache already holds
// (bound, or assumed here) is charged already; an unknown or replaced pod
// is ignored, since its assumption cannot bind it.
func (s *Scheduler) AssumedElsewhere(namespace, name, uid, node string) {
	key := namespace + "/" + name
	f := &s.foreign
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.pods[key]; ok {
		if old == (foreignCharge{uid: uid, node: node}) {
			return
		}
		s.dropForeignLocked(key, old)
	}
	p := s.pendingRecord(key)
	if p == nil || p.UID != uid || node == "" {
		return
	}
	if _, ok := s.cache.GetPod(key); ok {
		return
	}
	placed := *p
	placed.NodeName = node
	if err := s.cache.AddPod(&placed); err != nil {
		s.logger.Warn("cache add of assumed pod failed", zap.String("pod", key), zap.Error(err))
		return
	}
	if f.pods == nil {
		f.pods = map[string]foreignCharge{}
	}
	f.pods[key] = foreignCharge{uid: uid, node: node}
}

// AssumptionGone releases the room of a deleted assumption, if it was
// charged here, and wakes the pods that room may help.
func (s *Scheduler) AssumptionGone(namespace, name string) {
	key := namespace + "/" + name
	f := &s.foreign
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.pods[key]; ok {
		s.dropForeignLocked(key, c)
	}
}

// ResetAssumptions replaces the charged assumptions with a fresh listing
// of other replicas' assumptions (each key -> uid, node).
func (s *Scheduler) ResetAssumptions(live map[string]AssumedPod) {
	f := &s.foreign
	f.mu.Lock()
	for key, c := range f.pods {
		if a, ok := live[key]; !ok || a.UID != c.uid || a.Node != c.node {
			s.dropForeignLocked(key, c)
		}
	}
	f.mu.Unlock()
	for _, a := range live {
		s.AssumedElsewhere(a.Namespace, a.Name, a.UID, a.Node)
	}
}

// AssumedPod is another replica's assumption, for ResetAssumptions.
type AssumedPod struct {
	Namespace, Name, UID, Node string
}

// dropForeignLocked removes a charge, from the set and from the cache
// unless the cache holds the pod as something else now. f.mu held.
func (s *Scheduler) dropForeignLocked(key string, c foreignCharge) {
	delete(s.foreign.pods, key)
	cached, ok := s.cache.GetPod(key)
	if !ok || cached.UID != c.uid || cached.NodeName != c.node || s.cache.IsAssumed(key) {
		return
	}
	if err := s.cache.RemovePod(cached); err != nil {
		s.logger.Warn("cache remove of assumed pod failed", zap.String("pod", key), zap.Error(err))
		return
	}
	ev := framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete, Label: "AssignedPodDelete"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, cached, nil)
}

// forgetForeign drops p's entry without touching the cache: p was bound
// (the cache's update turns the charge into the binding) or deleted
// (DeletePod removes it).
func (s *Scheduler) forgetForeign(p *framework.Pod) {
	f := &s.foreign
	f.mu.Lock()
	if len(f.pods) > 0 { // usually none: spares the key on every binding
		delete(f.pods, p.Key())
	}
	f.mu.Unlock()
}

// assumedElsewhere tells whether the cache holds p only for another
// replica's assumption.
func (s *Scheduler) assumedElsewhere(p *framework.Pod) bool {
	f := &s.foreign
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.pods[p.Key()]
	return ok && c.uid == p.UID
}

// pendingRecord finds the latest pending record of a pod. Shards are keyed
// by the pod's group too, which the key alone does not tell, so each is
// looked at.
func (s *Scheduler) pendingRecord(key string) *framework.Pod {
	for _, sh := range s.shards {
		sh.lock()
		p := sh.pending[key]
		sh.unlock()
		if p != nil {
			return p
		}
	}
	return nil
}
