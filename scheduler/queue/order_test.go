package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// New(nil) orders activeQ on keys it keeps per entry; it must pop exactly
// as the same queue given DefaultLess, which reads the pods each time,
// through adds, priority changes, deletes, promotions and pops.
func TestDefaultOrderMatchesDefaultLess(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			clock := newFakeClock()
			keyed := New(nil, WithClock(clock))
			given := New(DefaultLess, WithClock(clock))
			t.Cleanup(keyed.Close)
			t.Cleanup(given.Close)
			if keyed.active.rekey == nil || given.active.rekey != nil {
				t.Fatal("New(nil) should keep keys per entry and New(DefaultLess) not")
			}
			ctx := context.Background()
			pods := map[string]*framework.Pod{}
			for step := range 3000 {
				name := fmt.Sprint("p", rng.IntN(300))
				p, known := pods[name]
				switch op := rng.IntN(10); {
				case op < 5 || !known:
					p = newPod(name, int32(rng.IntN(4)))
					pods[name] = p
					keyed.Add(p)
					given.Add(p)
				case op < 7:
					q := *p
					q.Priority = int32(rng.IntN(4))
					pods[name] = &q
					keyed.Update(p, &q)
					given.Update(p, &q)
				case op < 8:
					delete(pods, name)
					keyed.Delete(p)
					given.Delete(p)
				case op < 9:
					keyed.Promote(p.Key())
					given.Promote(p.Key())
				default:
					for range rng.IntN(5) + 1 {
						a, errA := popNow(ctx, keyed)
						b, errB := popNow(ctx, given)
						if (errA == nil) != (errB == nil) || (a != nil && b != nil && a.Pod.Key() != b.Pod.Key()) {
							t.Fatalf("step %d: keyed popped %v (%v), DefaultLess %v (%v)", step, keyOf(a), errA, keyOf(b), errB)
						}
						if a != nil {
							delete(pods, a.Pod.Name)
							keyed.Done(a.Pod.Key())
							given.Done(b.Pod.Key())
						}
					}
				}
				clock.Step(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		})
	}
}

// popNow pops without waiting: nil when activeQ is empty.
func popNow(ctx context.Context, q *PriorityQueue) (*framework.QueuedPodInfo, error) {
	q.mu.Lock()
	empty := q.active.len() == 0
	q.mu.Unlock()
	if empty {
		return nil, nil
	}
	return q.Pop(ctx)
}

func keyOf(qpi *framework.QueuedPodInfo) string {
	if qpi == nil {
		return "<none>"
	}
	return qpi.Pod.Key()
}
