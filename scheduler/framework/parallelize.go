package framework

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
)

// DefaultParallelism is kube-scheduler's default worker count.
const DefaultParallelism = 16

// Parallelizer runs independent pieces of work (usually one per node) on a
// bounded number of goroutines, in chunks of consecutive pieces so the
// per-piece overhead stays small. With parallelism 1, or when everything
// fits in one chunk, it runs inline on the caller's goroutine: shards
// already keep every core busy, so goroutines would only add cost.
//
// In parallel, the caller works too, and helpers join as the Go scheduler
// starts them: a helper that has not started by the time the caller ran out
// of chunks is called off, so a busy machine (every core taken by another
// shard loop) costs a goroutine start, not a wait for a core. Chunks are
// claimed in order from one counter, so a helper that starts late takes
// fewer of them instead of holding up the end.
type Parallelizer struct {
	parallelism int
}

// NewParallelizer returns a Parallelizer using up to parallelism
// goroutines (the caller's included); values below 1 mean 1.
func NewParallelizer(parallelism int) Parallelizer {
	return Parallelizer{parallelism: max(parallelism, 1)}
}

// Parallelism returns the worker count.
func (p Parallelizer) Parallelism() int { return max(p.parallelism, 1) }

// chunkSize is kube's choice: about sqrt(n), but small enough that every
// worker gets a chunk.
func chunkSize(pieces, parallelism int) int {
	s := int(math.Sqrt(float64(pieces)))
	if r := pieces/parallelism + 1; s > r {
		s = r
	}
	return max(s, 1)
}

// Until calls doWork(i) for every i in [0, pieces) unless ctx is cancelled
// first; cancellation is checked between chunks, so pieces of a started
// chunk still run. It returns when all started work is done.
func (p Parallelizer) Until(ctx context.Context, pieces int, doWork func(piece int)) {
	p.run(ctx, pieces, func(lo, hi int, _ bool) (int, bool) {
		for i := lo; i < hi; i++ {
			doWork(i)
		}
		return hi, false
	})
}

// UntilStopped is Until where doWork may return true to stop: no piece
// starts after that on the inline path, and no chunk starts after that on
// the parallel path. Chunks are taken in order and a chunk once taken is
// finished, so the pieces done always form a prefix of whole chunks (plus,
// inline, the pieces up to the stop). It returns the length of that prefix:
// no piece at or past it was started.
func (p Parallelizer) UntilStopped(ctx context.Context, pieces int, doWork func(piece int) (stop bool)) (covered int) {
	return p.run(ctx, pieces, func(lo, hi int, inline bool) (int, bool) {
		stop := false
		for i := lo; i < hi; i++ {
			if doWork(i) {
				if inline {
					return i + 1, true
				}
				stop = true
			}
		}
		return hi, stop
	})
}

// UntilFound checks pieces in order until want of them are hits, as a
// filter pass looks for enough feasible nodes: check(i) says whether piece
// i is a hit, and may say stop (a failure) to end the walk. It returns
// covered, which bounds the pieces checked: none at or past covered was.
// Unless check said stop, every piece before covered was checked, and
// those pieces hold want hits, or all the hits there are, or ctx was
// cancelled (checked between chunks, as by Until).
//
// Inline, the walk ends at the want-th hit. In parallel, chunks are taken
// in order and finished once taken (so covered is whole chunks), and each
// worker adds its hits to the shared count once per chunk rather than once
// per piece: a counter every core increments per node bounces its cache
// line between cores on every node. Pieces past the want-th hit may
// therefore be checked too; keep only the prefix up to it, and the outcome
// does not depend on the parallelism.
func (p Parallelizer) UntilFound(ctx context.Context, pieces, want int, check func(piece int) (hit, stop bool)) (covered int) {
	if want <= 0 {
		return 0
	}
	var hits atomic.Int64
	return p.run(ctx, pieces, func(lo, hi int, inline bool) (int, bool) {
		local := 0
		for i := lo; i < hi; i++ {
			hit, stop := check(i)
			if stop {
				return i + 1, true
			}
			if hit {
				local++
				if inline && int(hits.Load())+local >= want {
					return i + 1, true
				}
			}
		}
		return hi, int(hits.Add(int64(local))) >= want
	})
}

// chunkFunc runs pieces [lo, hi) and returns one past the last piece it
// started and whether to stop. Inline (one worker), it may end the walk
// mid-chunk; in parallel it must start every piece of the chunk unless it
// stops for a failure, since the walks above promise whole chunks.
type chunkFunc func(lo, hi int, inline bool) (end int, stop bool)

// run hands the chunks of pieces to fn and returns one past the furthest
// piece handed out.
func (p Parallelizer) run(ctx context.Context, pieces int, fn chunkFunc) (covered int) {
	if pieces <= 0 {
		return 0
	}
	workers := p.Parallelism()
	chunk := chunkSize(pieces, workers)
	chunks := (pieces + chunk - 1) / chunk
	workers = min(workers, chunks)
	done := ctx.Done()
	if workers <= 1 {
		for lo := 0; lo < pieces; lo += chunk {
			if cancelled(done) {
				return lo
			}
			end, stop := fn(lo, min(lo+chunk, pieces), true)
			if stop {
				return end
			}
		}
		return pieces
	}
	w := &walk{fn: fn, done: done, pieces: pieces, chunk: chunk, chunks: int64(chunks), helpers: make([]atomic.Int32, workers-1)}
	w.wg.Add(workers - 1)
	for h := range w.helpers {
		go w.help(h)
	}
	w.work()
	// Whoever has not started has nothing left to do: call it off rather
	// than wait for a core to start it on.
	for h := range w.helpers {
		if w.helpers[h].CompareAndSwap(helperIdle, helperCalledOff) {
			w.wg.Done()
		}
	}
	w.wg.Wait()
	return min(int(min(w.next.Load(), w.chunks))*chunk, pieces)
}

const (
	helperIdle int32 = iota
	helperStarted
	helperCalledOff
)

// walk is one parallel run, shared by the caller and its helpers. It is on
// the heap and outlives the run for helpers called off, which only touch
// their own slot.
type walk struct {
	fn      chunkFunc
	done    <-chan struct{}
	pieces  int
	chunk   int
	chunks  int64
	next    atomic.Int64 // chunks claimed
	stopped atomic.Bool
	helpers []atomic.Int32 // helperIdle, helperStarted or helperCalledOff
	wg      sync.WaitGroup // helpers not called off
}

func (w *walk) help(h int) {
	if !w.helpers[h].CompareAndSwap(helperIdle, helperStarted) {
		return
	}
	defer w.wg.Done()
	w.work()
}

func (w *walk) work() {
	for {
		// Check before claiming: a claimed chunk is always finished, so
		// the pieces done form a prefix of whole chunks.
		if w.stopped.Load() || cancelled(w.done) {
			return
		}
		c := w.next.Add(1) - 1
		if c >= w.chunks {
			return
		}
		lo := int(c) * w.chunk
		if _, stop := w.fn(lo, min(lo+w.chunk, w.pieces), false); stop {
			w.stopped.Store(true)
		}
	}
}

func cancelled(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
