package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// TestSettleLeftWhileLocked: successful bindings that end while the
// shard's lock is held leave their settling to its holder, and none is
// lost, whether they pushed before the holder unlocked or raced it.
func TestSettleLeftWhileLocked(t *testing.T) {
	s, err := New(context.Background(), Config{Shards: 1}, &watchCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	sh := s.shards[0]
	const n = 200
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/p%d", i)
		sh.inFlight[keys[i]] = &framework.Pod{Namespace: "ns", Name: fmt.Sprint("p", i)}
	}
	// inFlight counts attempts through the raw mutex: lock would settle
	// what was left, hiding a key the hand-off stranded.
	inFlight := func() int {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return len(sh.inFlight)
	}
	sh.lock()
	var wg sync.WaitGroup
	for _, key := range keys[:n/2] {
		wg.Go(func() { sh.settle(key, nil) })
	}
	wg.Wait() // all left: the lock is held
	if got := len(sh.inFlight); got != n {
		t.Fatalf("settled under another's lock: %d in flight, want %d", got, n)
	}
	sh.unlock()
	if got := inFlight(); got != n/2 {
		t.Fatalf("after the holder unlocked: %d in flight, want %d", got, n/2)
	}
	sh.lock()
	for _, key := range keys[n/2:] {
		wg.Go(func() { sh.settle(key, nil) })
	}
	sh.unlock()
	wg.Wait()
	left := inFlight()
	if left != 0 {
		t.Errorf("%d attempts never settled", left)
	}
}
