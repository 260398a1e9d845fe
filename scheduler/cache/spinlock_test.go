package cache

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Writers keep two counters equal under the write lock; readers, under the
// read lock, must never see them apart, and no increment may be lost. With
// either lock not excluding, a reader sees a torn pair or the total falls
// short (and -race reports the unguarded access).
func TestSpinRWMutexExcludes(t *testing.T) {
	var (
		mu     spinRWMutex
		a, b   int
		torn   atomic.Int64 // readers share the read lock
		wg     sync.WaitGroup
		rounds = 2000
	)
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range rounds {
				mu.Lock()
				a++
				b++
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				mu.RLock()
				if a != b {
					torn.Add(1)
				}
				mu.RUnlock()
			}
		}()
	}
	wg.Wait()
	if a != 4*rounds || b != 4*rounds {
		t.Errorf("counters %d and %d after %d locked increments each", a, b, 4*rounds)
	}
	if n := torn.Load(); n != 0 {
		t.Errorf("readers saw the counters apart %d times", n)
	}
}

// spin retries until an attempt succeeds, and gives up (so the caller
// blocks) when none does within the budget. The budgets are extremes, so
// that neither outcome hangs on how fast the machine spins: a 500th try
// within an hour, and nothing left of a negative budget at the first look
// at the clock.
func TestSpinRetriesThenGivesUp(t *testing.T) {
	if !canSpin {
		t.Skip("one CPU: the lock blocks at once")
	}
	tries := 0
	if !spin(func() bool { tries++; return tries == 500 }, time.Hour) || tries != 500 {
		t.Errorf("spin stopped after %d tries; want success on the 500th", tries)
	}
	tries = 0
	if spin(func() bool { tries++; return false }, -1) {
		t.Error("spin reported success with every attempt failing")
	}
	if tries != spinCheckEvery {
		t.Errorf("spin gave up after %d tries; want %d, at its first look at the clock", tries, spinCheckEvery)
	}
}
