package store

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Hundreds of subscribers catching up from before the ring and leaving at
// once used to wedge the etcd watch stream their catch-up watches shared
// with the hub's: the subscribers never returned, the hub stopped hearing
// from etcd, and the store could not close.
func TestFanoutCatchUpsLeavingAtOnceWedgeNothing(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { testCatchUpsLeavingAtOnce(t, openStore(t, sharedEtcd(t))) })
	// Over gRPC, flow-control windows give the cycle more slack (this one
	// passed without the fix); the per-stream catch-ups must hold there too.
	t.Run("network", func(t *testing.T) {
		testCatchUpsLeavingAtOnce(t, openStore(t, sharedEtcd(t), func(c *Config) { c.Client = nil }))
	})
}

func testCatchUpsLeavingAtOnce(t *testing.T, s *Store) {
	ctx := testCtx(t)
	from, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A write outside the bindings' keys before the hub starts leaves from
	// behind the ring with nothing to catch up on: every subscriber from
	// there waits on a catch-up watch of its own until the next binding.
	if _, err := s.Client().Put(ctx, s.keys.alloc+"fanout-test-unrelated", "x"); err != nil {
		t.Fatal(err)
	}
	warm, stopWarm := collect(t, s, from)
	want := bindMany(t, s, "warm", 1)
	next(t, warm, len(want))
	stopWarm()
	if h, err := s.hub(ctx); err != nil || h.coveredRev() <= from {
		t.Fatalf("hub started (err %v) covering nothing past %d", err, from)
	}
	leaks := goleak.IgnoreCurrent()
	watchers := etcdWatchers(t)

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.FollowBindings(sctx, from, func(*berthv1.BindingEvent) error { return nil })
		}()
	}
	// Leave once dozens of catch-up watches are up, so their cancels come
	// in one burst. Not all maxCatchUps: the warm subscriber's watch may
	// still be winding down in the baseline, so the count can top out one
	// or two short of it.
	eventually(t, "catch-up watches to start", func() bool { return etcdWatchers(t)-watchers >= maxCatchUps/2 })
	cancel()
	returned := make(chan struct{})
	go func() {
		wg.Wait()
		close(returned)
	}()
	select {
	case <-returned:
	case <-ctx.Done():
		// Closing the client unwedges its streams, so the store can close.
		s.Client().Close()
		t.Fatal("cancelled subscribers never returned: their catch-up watches wedged")
	}

	// The hub still follows etcd: a subscriber from the ring and one
	// catching up both see a write made after the burst.
	live, stopLive := collect(t, s, want[len(want)-1].Revision)
	old, stopOld := collect(t, s, from)
	fresh := bindMany(t, s, "after", 1)
	if diff := cmp.Diff(fresh, next(t, live, len(fresh)), protocmp.Transform()); diff != "" {
		t.Fatalf("ring subscriber after the burst (-want +got):\n%s", diff)
	}
	want = append(want, fresh...)
	if diff := cmp.Diff(want, next(t, old, len(want)), protocmp.Transform()); diff != "" {
		t.Fatalf("catch-up after the burst (-want +got):\n%s", diff)
	}
	stopLive()
	stopOld()
	// Every catch-up's etcd stream has wound down with its watch.
	if err := goleak.Find(leaks); err != nil {
		t.Fatal(err)
	}
}
