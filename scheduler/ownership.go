package scheduler

import (
	"maps"

	"github.com/berth-io/berth/scheduler/framework"
)

// DefaultLogicalShards is how many logical shards the pod key space is cut
// into when Config.LogicalShards is zero. Replicas divide these among
// themselves; each replica's loops divide its share.
const DefaultLogicalShards = 64

// ShardOf is the logical shard of a pod. Members of a pod group share one,
// so one replica and one loop see the whole gang. The hash is 32-bit
// FNV-1a of "namespace/name" (or "namespace/group/group"), which every
// replica must agree on; it is computed over the parts in place because
// the core asks several times per pod and the joined key and hash.Hash
// allocated each time.
func ShardOf(p *framework.Pod, shards int) int {
	h := fnv1a(fnvOffset32, p.Namespace)
	h = fnv1a(h, "/")
	if p.PodGroup != "" {
		h = fnv1a(fnv1a(h, p.PodGroup), "/group")
	} else {
		h = fnv1a(h, p.Name)
	}
	return int(h % uint32(shards))
}

// The 32-bit FNV-1a parameters.
const (
	fnvOffset32 uint32 = 2166136261
	fnvPrime32  uint32 = 16777619
)

func fnv1a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime32
	}
	return h
}

// ShardOf is the logical shard of p in this scheduler.
func (s *Scheduler) ShardOf(p *framework.Pod) int { return ShardOf(p, s.cfg.LogicalShards) }

// SetViewRevision records that the cache now holds every change up to rev.
// Assumptions carry it, so a commit can tell whether another writer added
// to the node after the view the placement was checked against.
func (s *Scheduler) SetViewRevision(rev int64) {
	for {
		cur := s.view.Load()
		if rev <= cur {
			return
		}
		if s.view.CompareAndSwap(cur, rev) {
			break
		}
	}
	s.viewMu.Lock()
	var ready []func()
	kept := s.viewWaiters[:0]
	for _, w := range s.viewWaiters {
		if w.revision <= rev {
			ready = append(ready, w.fn)
		} else {
			kept = append(kept, w)
		}
	}
	s.viewWaiters = kept
	s.viewMu.Unlock()
	for _, fn := range ready {
		fn()
	}
}

type viewWaiter struct {
	revision int64
	fn       func()
}

// afterView runs fn once the view has reached rev: at once if it has.
func (s *Scheduler) afterView(rev int64, fn func()) {
	s.viewMu.Lock()
	if s.view.Load() < rev {
		s.viewWaiters = append(s.viewWaiters, viewWaiter{revision: rev, fn: fn})
		s.viewMu.Unlock()
		return
	}
	s.viewMu.Unlock()
	fn()
}

// OwnsPod reports whether this replica schedules p: whether it owns p's
// logical shard.
func (s *Scheduler) OwnsPod(p *framework.Pod) bool {
	_, ok := s.epochOf(s.ShardOf(p))
	return ok
}

// AcquireShard makes this replica schedule a logical shard: its pending
// pods are queued, and commits for them carry epoch as their fence.
func (s *Scheduler) AcquireShard(shard int, epoch int64) {
	s.changeOwned(func(owned map[int]int64) { owned[shard] = epoch })
	s.shards[shard%len(s.shards)].queueShard(shard)
}

// ReleaseShard stops scheduling a logical shard at once: its pods leave the
// queue, and attempts under way are dropped when they end (their commits
// fail the fence). The pods stay known, for a later AcquireShard.
func (s *Scheduler) ReleaseShard(shard int) {
	s.changeOwned(func(owned map[int]int64) { delete(owned, shard) })
	s.shards[shard%len(s.shards)].dropShard(shard)
	s.releaseWaiting("shard moved", func(p *framework.Pod) bool { return s.ShardOf(p) == shard })
}

// OwnedShards counts the logical shards this replica owns.
func (s *Scheduler) OwnedShards() int {
	return len(*s.owned.Load())
}

// changeOwned publishes a changed copy of the owned shards.
func (s *Scheduler) changeOwned(change func(map[int]int64)) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	next := maps.Clone(*s.owned.Load())
	change(next)
	s.owned.Store(&next)
}

func (sh *shard) queueShard(shard int) {
	sh.lock()
	defer sh.unlock()
	for key, p := range sh.pending {
		if _, busy := sh.inFlight[key]; !busy && sh.s.ShardOf(p) == shard {
			sh.queue.Add(p)
		}
	}
}

func (sh *shard) dropShard(shard int) {
	sh.lock()
	defer sh.unlock()
	for key, p := range sh.pending {
		if sh.s.ShardOf(p) != shard {
			continue
		}
		// The new owner decides afresh; our nomination would only hold
		// room in this replica's view.
		sh.s.nominator.forget(p)
		if _, busy := sh.inFlight[key]; !busy {
			sh.queue.Delete(p)
		}
	}
}

// LogicalShards is the number of logical shards pods hash to.
func (s *Scheduler) LogicalShards() int { return s.cfg.LogicalShards }
