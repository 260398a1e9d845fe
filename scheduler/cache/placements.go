package cache

import "github.com/berth-io/berth/scheduler/framework"

// recentPlacements bounds the history kept for re-checks: enough for the
// placements of a few milliseconds at full speed.
const recentPlacements = 4096

// placementLog numbers pods newly charged to nodes (assumed here, or bound
// without having been assumed here) and remembers the latest ones, so a
// shard can tell exactly which pods landed after its snapshot. Confirming
// an assumption is not a new placement; removals are not placements.
type placementLog struct {
	seq  int64
	ring [recentPlacements]*framework.PodInfo
}

func (l *placementLog) record(pi *framework.PodInfo) {
	l.seq++
	l.ring[l.seq%recentPlacements] = pi
}

// Placements is the number of placements so far.
func (c *Cache) Placements() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.placed.seq
}

// PlacedSince returns the pods placed after placement number seq, oldest
// first, or false if some of them are no longer remembered.
func (c *Cache) PlacedSince(seq int64) ([]*framework.PodInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.placed.seq - seq
	if n < 0 || n > recentPlacements {
		return nil, false
	}
	out := make([]*framework.PodInfo, 0, n)
	for s := seq + 1; s <= c.placed.seq; s++ {
		out = append(out, c.placed.ring[s%recentPlacements])
	}
	return out, true
}

// PlacedOnSince reports whether a pod placed after placement number seq
// landed on node; when that history is no longer remembered it says yes,
// as the caller must then assume the worst.
func (c *Cache) PlacedOnSince(seq int64, node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.placed.seq - seq
	if n < 0 || n > recentPlacements {
		return true
	}
	for s := seq + 1; s <= c.placed.seq; s++ {
		if c.placed.ring[s%recentPlacements].Pod.NodeName == node {
			return true
		}
	}
	return false
}
