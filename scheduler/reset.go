package scheduler

import (
	"context"
	"runtime"
	"sync"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/framework"
)

// A replica's first listing (at every restart) reaches an empty scheduler.
// Applied one event at a time, as a re-listing must be, it takes every
// lock and wakes every queue once per pod, though no queue holds a pod to
// wake; at a million pods that is most of a restart. So a scheduler that
// knows nothing yet is loaded in bulk: each kind sorted once, pods' costly
// PodInfos built on every core, the cache filled under one lock (its
// NodeInfos charged on every core) and each shard's queue under its own, in
// parallel. What results is what the event path would build; only the
// timing differs.

// isEmpty reports a scheduler that holds no node, pod or pending pod.
func (s *Scheduler) isEmpty() bool {
	s.mu.Lock()
	known := len(s.nodes)
	s.mu.Unlock()
	if known > 0 || s.cache.NodeCount() > 0 || s.cache.PodCount() > 0 {
		return false
	}
	for _, sh := range s.shards {
		sh.lock()
		busy := len(sh.pending) + len(sh.inFlight)
		sh.unlock()
		if busy > 0 {
			return false
		}
	}
	return true
}

// loadEmpty is Reset for an empty scheduler.
func (s *Scheduler) loadEmpty(nodes []*framework.Node, pods []*framework.Pod) {
	s.groups.resetMembers()
	s.mu.Lock()
	if len(s.nodes) == 0 {
		s.nodes = make(map[string]*framework.Node, len(nodes))
	}
	for _, n := range nodes {
		s.nodes[n.Name] = n
	}
	s.mu.Unlock()
	s.cache.AddNodes(nodes)
	s.metrics.eventN("NodeAdd", len(nodes))

	var bound []*framework.Pod
	pending := make([][]*framework.Pod, len(s.shards))
	for _, p := range pods {
		switch {
		case p.Phase.Terminal():
			// Holds nothing; only its group membership is kept, below.
		case p.NodeName != "":
			bound = append(bound, p)
		default:
			i := s.ShardOf(p) % len(s.shards)
			pending[i] = append(pending[i], p)
		}
	}
	// Members are known before their pods are queued, so a gang's
	// PreEnqueue sees the whole gang at once; no queue holds a pod yet for
	// their events to wake, and no member waits at Permit.
	groupAdds := 0
	for _, p := range pods {
		if added, _ := s.groups.observe(p); added {
			groupAdds++
		}
	}
	s.metrics.eventN("PodGroupMemberAdd", groupAdds)

	if err := s.cache.AddPodInfos(newPodInfos(bound)); err != nil {
		s.logger.Warn("cache load of bound pods failed in part", zap.Error(err))
	}
	s.metrics.eventN("AssignedPodAdd", len(bound))

	var wg sync.WaitGroup
	for i, ps := range pending {
		wg.Go(func() { s.shards[i].loadPending(ps) })
	}
	wg.Wait()
}

// newPodInfos builds the PodInfos of pods on every core.
func newPodInfos(pods []*framework.Pod) []*framework.PodInfo {
	pis := make([]*framework.PodInfo, len(pods))
	framework.NewParallelizer(runtime.GOMAXPROCS(0)).Until(context.Background(), len(pods), func(i int) {
		pis[i] = framework.NewPodInfo(pods[i])
	})
	return pis
}

// loadPending is upsertPending for many pods of this shard, under one
// lock.
func (sh *shard) loadPending(pods []*framework.Pod) {
	for _, p := range pods {
		if !sh.s.OwnsPod(p) {
			sh.s.nominatedElsewhere(p)
		}
	}
	sh.lock()
	defer sh.unlock()
	for _, p := range pods {
		key := p.Key()
		old := sh.pending[key]
		sh.pending[key] = p
		if _, busy := sh.inFlight[key]; busy || !sh.s.OwnsPod(p) {
			continue // as upsertPending: kept for when we own it
		}
		if old == nil {
			sh.queue.Add(p)
		} else {
			sh.queue.Update(old, p)
		}
	}
}
