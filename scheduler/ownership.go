package scheduler

import (
	"hash/fnv"

	"github.com/berth-io/berth/scheduler/framework"
)

// DefaultLogicalShards is how many logical shards the pod key space is cut
// into when Config.LogicalShards is zero. Replicas divide these among
// themselves; each replica's loops divide its share.
const DefaultLogicalShards = 64

// ShardOf is the logical shard of a pod. Members of a pod group share one,
// so one replica and one loop see the whole gang.
func ShardOf(p *framework.Pod, shards int) int {
	key := p.Key()
	if p.PodGroup != "" {
		key = p.Namespace + "/" + p.PodGroup + "/group"
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(shards))
}

// ShardOf is the logical shard of p in this scheduler.
func (s *Scheduler) ShardOf(p *framework.Pod) int { return ShardOf(p, s.cfg.LogicalShards) }

// SetViewRevision records that the cache now holds every change up to rev.
// Assumptions carry it, so a commit can tell whether another writer added
// to the node after the view the placement was checked against.
func (s *Scheduler) SetViewRevision(rev int64) {
	for {
		cur := s.view.Load()
		if rev <= cur || s.view.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// OwnsPod reports whether this replica schedules p: whether it owns p's
// logical shard.
func (s *Scheduler) OwnsPod(p *framework.Pod) bool {
	_, ok := s.epochOf(s.ShardOf(p))
	return ok
}
