package cache

import (
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
)

// recentPlacements bounds the history kept for re-checks: enough for the
// placements of a few milliseconds at full speed.
const recentPlacements = 4096

// placementLog numbers pods newly charged to nodes (assumed here, or bound
// without having been assumed here) and remembers the latest ones, so a
// shard can tell exactly which pods landed after its snapshot. Confirming
// an assumption is not a new placement; removals are not placements.
//
// seq changes only under the cache's write lock, but is atomic so that
// Placements, which every cycle of every shard calls, needs no lock.
type placementLog struct {
	seq  atomic.Int64
	ring [recentPlacements]*framework.PodInfo
}

// record is a run of one placement. The ring slot is written before seq
// moves, and both under the write lock, so whoever reads a seq and then
// takes the read lock finds the slot filled.
func (l *placementLog) record(pi *framework.PodInfo) {
	r := l.startRun()
	r.record(pi)
	r.end()
}

// placementRun records many placements under one write lock: seq moves
// once, at end. record's atomic store, made per pod, waits for every write
// before it to drain: a tenth of a microsecond each at a restart's bulk
// load of a million pods.
type placementRun struct {
	log *placementLog
	seq int64
}

func (l *placementLog) startRun() placementRun { return placementRun{log: l, seq: l.seq.Load()} }

func (r *placementRun) record(pi *framework.PodInfo) {
	r.seq++
	r.log.ring[r.seq%recentPlacements] = pi
}

func (r *placementRun) end() { r.log.seq.Store(r.seq) }

// Placements is the number of placements so far.
func (c *Cache) Placements() int64 {
	return c.placed.seq.Load()
}

// PlacedSince returns the pods placed after placement number seq, oldest
// first, or false if some of them are no longer remembered.
func (c *Cache) PlacedSince(seq int64) ([]*framework.PodInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*framework.PodInfo
	complete := c.eachPlacedLocked(seq, func(pi *framework.PodInfo) bool {
		out = append(out, pi)
		return true
	})
	if !complete {
		return nil, false
	}
	return out, true
}

// PlacedOnSince reports whether a pod placed after placement number seq
// landed on node; when that history is no longer remembered it says yes,
// as the caller must then assume the worst.
func (c *Cache) PlacedOnSince(seq int64, node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	landed := false
	complete := c.eachPlacedLocked(seq, func(pi *framework.PodInfo) bool {
		landed = pi.Pod.NodeName == node
		return !landed
	})
	return landed || !complete
}

// eachPlacedLocked calls fn on the pods placed after placement number seq,
// oldest first, until fn returns false. It returns false, calling fn on
// none, if some of those pods are no longer remembered.
func (c *Cache) eachPlacedLocked(seq int64, fn func(*framework.PodInfo) bool) bool {
	last := c.placed.seq.Load()
	if n := last - seq; n < 0 || n > recentPlacements {
		return false
	}
	for s := seq + 1; s <= last; s++ {
		if !fn(c.placed.ring[s%recentPlacements]) {
			break
		}
	}
	return true
}
