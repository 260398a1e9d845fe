package scheduler

import "context"

// DefaultMaxBindingCycles bounds the binding cycles that wait for their
// commit at once. A group commit takes a few hundred bindings per Txn
// and keeps several Txns in flight, so a few thousand waiting keep every
// Txn full. Without a bound, shard loops that place faster than storage
// commits ran more than 11,000 binding cycles at once (20,000 nodes,
// 200,000 pods): a goroutine stack, an assumed copy and a cycle state
// each, about a tenth of the replica's peak memory, and each binding
// waited behind the others for a second.
const DefaultMaxBindingCycles = 4096

// bindSlots is a counting semaphore of binding cycles. A shard loop takes
// a slot for each pod it pops, before the cycle, so while every slot is
// taken the other pods wait in the queue rather than as assumed pods; it
// waits holding no lock (Explain dry runs take cycleMu). A cycle that ends
// in a binding hands its slot to the binding goroutine; any other outcome
// gives it back, so an idle loop holds none.
//
// Bindings that wait at Permit (gang members) take no slot: a gang larger
// than the bound would otherwise hold every slot while waiting for members
// that could never be placed. Every slot is then held by a binding on its
// way to a commit or by a cycle under way, and each gives its slot back by
// itself: a waiting loop always gets one.
type bindSlots struct {
	slots chan struct{}
	// waited counts the loops' waits for a slot (metrics).
	waited func()
}

func newBindSlots(n int, waited func()) *bindSlots {
	return &bindSlots{slots: make(chan struct{}, n), waited: waited}
}

// acquire takes a slot, waiting while all are taken; false if ctx ended
// first.
func (b *bindSlots) acquire(ctx context.Context) bool {
	select {
	case b.slots <- struct{}{}:
		return true
	default:
	}
	b.waited()
	select {
	case b.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (b *bindSlots) release() { <-b.slots }

// inUse is the number of slots taken.
func (b *bindSlots) inUse() int { return len(b.slots) }
