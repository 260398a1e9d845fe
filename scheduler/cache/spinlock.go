package cache

import (
	"runtime"
	"sync"
	"time"
)

// spinRWMutex is the cache's lock: a sync.RWMutex whose Lock and RLock
// first retry for up to lockSpinBudget before they block.
//
// Every shard loop takes the cache's read lock to update its snapshot and
// its write lock to assume, once a pod each, and the goroutine applying the
// store's events takes the write lock for every confirmation; each holds it
// for a few microseconds. A sync.RWMutex parks a reader behind a writer at
// once, and sync.Mutex spins only briefly and only when no goroutine waits
// for its P. Waking a parked loop puts it on the waker's P, so two loops
// blocking on each other took turns on one core while the other idled:
// with two loops of pods all alike, each cycle took twice as long as with
// one (BenchmarkLoops). Retrying lets the loser keep its own core through
// the winner's short hold.
type spinRWMutex struct {
	mu sync.RWMutex
}

// lockSpinBudget bounds the retrying: about the longest hold a loop's
// snapshot update or assumption takes here, so a hold that lasts longer
// (a node update that recharges its pods, a listing) is waited for by
// blocking, as before. A failed attempt costs about 1 ns for a reader and
// 7 for a writer on this 2-core VM.
const lockSpinBudget = 20 * time.Microsecond

// spinCheckEvery is how many failed attempts pass between looks at the
// clock.
const spinCheckEvery = 64

// canSpin: retrying on one CPU only delays the holder.
var canSpin = runtime.NumCPU() > 1

func (m *spinRWMutex) Lock() {
	if !m.mu.TryLock() && !spin(m.mu.TryLock, lockSpinBudget) {
		m.mu.Lock()
	}
}

func (m *spinRWMutex) Unlock() { m.mu.Unlock() }

func (m *spinRWMutex) RLock() {
	if !m.mu.TryRLock() && !spin(m.mu.TryRLock, lockSpinBudget) {
		m.mu.RLock()
	}
}

func (m *spinRWMutex) RUnlock() { m.mu.RUnlock() }

// spin retries try until it succeeds or budget has passed.
func spin(try func() bool, budget time.Duration) bool {
	if !canSpin {
		return false
	}
	start := time.Now()
	for i := 1; ; i++ {
		if try() {
			return true
		}
		if i%spinCheckEvery == 0 && time.Since(start) > budget {
			return false
		}
	}
}
