package framework

// shrinkFloor: maps that never held more entries than this are left as
// they are; copying them would cost more than their buckets.
const shrinkFloor = 1024

// DeleteShrinking deletes k from m and returns the map to keep using: m
// itself, or, once m holds under a quarter of the most it held (*peak), a
// copy sized to what is left. Go maps never give memory back, and the
// queue's and shards' maps by pod grow to the largest backlog (a bulk load
// queues hundreds of thousands of pods at once), so they would hold that
// size for the life of the process. *peak tracks the most entries m held:
// the largest size a map reaches is what it holds before its next delete.
// Each copy costs at most a quarter of the deletes since the last one.
func DeleteShrinking[K comparable, V any](m map[K]V, k K, peak *int) map[K]V {
	*peak = max(*peak, len(m))
	delete(m, k)
	if *peak < shrinkFloor || len(m) >= *peak/4 {
		return m
	}
	out := make(map[K]V, len(m))
	for key, v := range m {
		out[key] = v
	}
	*peak = len(out)
	return out
}
