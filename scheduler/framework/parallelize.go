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
// bounded number of goroutines, in chunks so the per-piece overhead stays
// small. With parallelism 1, or when everything fits in one chunk, it
// runs inline on the caller's goroutine: shards already keep every core
// busy, so goroutines would only add cost.
type Parallelizer struct {
	parallelism int
}

// NewParallelizer returns a Parallelizer using up to parallelism
// goroutines; values below 1 mean 1.
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
	p.until(ctx, pieces, func(i int) bool { doWork(i); return false })
}

// UntilStopped is Until where doWork may return true to stop: no piece
// starts after that on the inline path, and no chunk starts after that on
// the parallel path. Chunks are taken in order and a chunk once taken is
// finished, so the pieces done always form a prefix of whole chunks (plus,
// inline, the pieces up to the stop).
func (p Parallelizer) UntilStopped(ctx context.Context, pieces int, doWork func(piece int) (stop bool)) {
	p.until(ctx, pieces, doWork)
}

func (p Parallelizer) until(ctx context.Context, pieces int, doWork func(piece int) bool) {
	if pieces <= 0 {
		return
	}
	workers := p.Parallelism()
	chunk := chunkSize(pieces, workers)
	chunks := (pieces + chunk - 1) / chunk
	workers = min(workers, chunks)
	done := ctx.Done()
	if workers <= 1 {
		for start := 0; start < pieces; start += chunk {
			if cancelled(done) {
				return
			}
			for i := start; i < min(start+chunk, pieces); i++ {
				if doWork(i) {
					return
				}
			}
		}
		return
	}
	var next atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				// Check before claiming: a claimed chunk is always finished,
				// so the pieces done form a prefix of whole chunks.
				if stopped.Load() || cancelled(done) {
					return
				}
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				start := c * chunk
				for i := start; i < min(start+chunk, pieces); i++ {
					if doWork(i) {
						stopped.Store(true)
					}
				}
			}
		}()
	}
	wg.Wait()
}

func cancelled(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
