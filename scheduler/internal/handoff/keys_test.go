package handoff

import (
	"fmt"
	"sync"
	"testing"
)

// Keys pushed from many goroutines while another drains are each taken
// exactly once.
func TestKeysDeliversEachKeyOnce(t *testing.T) {
	const pushers, each = 8, 5000
	var k Keys
	seen := map[string]int{}
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				k.Push(fmt.Sprint(p, "/", i))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	record := func(key string) { seen[key]++ }
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		k.Drain(record)
	}
	k.Drain(record)
	if !k.Empty() {
		t.Error("keys left after the last drain")
	}
	if len(seen) != pushers*each {
		t.Fatalf("drained %d distinct keys; want %d", len(seen), pushers*each)
	}
	for key, n := range seen {
		if n != 1 {
			t.Fatalf("key %s drained %d times", key, n)
		}
	}
}

func TestDrainIsNewestFirst(t *testing.T) {
	var k Keys
	k.Drain(func(string) { t.Fatal("drained an empty list") })
	for _, key := range []string{"a", "b", "c"} {
		k.Push(key)
	}
	var got []string
	k.Drain(func(key string) { got = append(got, key) })
	if fmt.Sprint(got) != "[c b a]" {
		t.Errorf("drained %v; want [c b a]", got)
	}
}
