package secure

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// watcher records a WatchBindings stream: its events and the highest
// revision it was told about (event or progress marker).
type watcher struct {
	mu     sync.Mutex
	events []*berthv1.BindingEvent
	rev    int64
	cancel context.CancelFunc
	done   chan struct{}
}

func startWatch(t *testing.T, conn *grpc.ClientConn, from int64) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := berthv1.NewSchedulerServiceClient(conn).WatchBindings(ctx, &berthv1.WatchBindingsRequest{FromRevision: from})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &watcher{cancel: cancel, done: make(chan struct{}), rev: from}
	go func() {
		defer close(w.done)
		for {
			resp, err := st.Recv()
			if err != nil {
				return
			}
			w.mu.Lock()
			if ev := resp.GetEvent(); ev != nil {
				w.events = append(w.events, ev)
				w.rev = max(w.rev, ev.GetRevision())
			}
			w.rev = max(w.rev, resp.GetProgressRevision())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

func (w *watcher) state() ([]*berthv1.BindingEvent, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*berthv1.BindingEvent(nil), w.events...), w.rev
}

func boundIn(evs []*berthv1.BindingEvent) map[string]int {
	out := map[string]int{}
	for _, ev := range evs {
		if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
			out[ev.GetNamespace()]++
		}
	}
	return out
}

func submitBound(t *testing.T, admin *grpc.ClientConn, round int) {
	t.Helper()
	for _, ns := range []string{"a", "b"} {
		for i := range 3 {
			p := &berthv1.Pod{Namespace: ns, Name: fmt.Sprintf("r%d-%d", round, i),
				Containers: []*berthv1.Container{{Name: "c", Image: "app:1", Requests: map[string]int64{"cpu": 10}}}}
			if _, err := berthv1.NewPodServiceClient(admin).SubmitPod(tctx(t, 10*time.Second), &berthv1.SubmitPodRequest{Pod: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestWatchLimitedToNamespace: an observer of namespace a never sees an
// event of namespace b, on a watch from the start, on one resumed from a
// revision, and in the listing of a new watch.
func TestWatchLimitedToNamespace(t *testing.T) {
	e := startSecure(t)
	admin := e.conn(t, caller{cert: "admin"})
	obs := e.conn(t, caller{cert: "obs-a"})
	if _, err := berthv1.NewClusterServiceClient(admin).UpsertNode(tctx(t, 10*time.Second), &berthv1.UpsertNodeRequest{
		Node: &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 100000, "memory": 1 << 40, "pods": 1000}}}); err != nil {
		t.Fatal(err)
	}
	all := startWatch(t, admin, 0)
	limited := startWatch(t, obs, 0)

	// seen waits until the admin's watch has seen allBound bindings in each
	// namespace and w has been told of everything up to there, then checks
	// w saw only namespace a, wantA of its bindings.
	seen := func(w *watcher, allBound, wantA int, what string) int64 {
		t.Helper()
		var target int64
		waitFor(t, "the bindings on the admin's watch", func() bool {
			evs, rev := all.state()
			target = rev
			return boundIn(evs)["a"] >= allBound && boundIn(evs)["b"] >= allBound
		})
		waitFor(t, what+" to catch up", func() bool { _, rev := w.state(); return rev >= target })
		evs, rev := w.state()
		for _, ev := range evs {
			if ev.GetNamespace() != "a" {
				t.Errorf("%s: observer of a saw %s/%s (%s)", what, ev.GetNamespace(), ev.GetName(), ev.GetType())
			}
		}
		if got := boundIn(evs)["a"]; got != wantA {
			t.Errorf("%s: %d bindings in a, want %d", what, got, wantA)
		}
		return rev
	}

	submitBound(t, admin, 1)
	resumeFrom := seen(limited, 3, 3, "watch from 0")
	limited.stop()

	submitBound(t, admin, 2)
	resumed := startWatch(t, obs, resumeFrom)
	seen(resumed, 6, 3, "resumed watch")

	// A new watch lists what is bound now: a's six pods only.
	fresh := startWatch(t, obs, 0)
	seen(fresh, 6, 6, "listing")
}
