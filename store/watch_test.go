package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestWatchBindingsFromZero(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)

	declared := pendingPod("ns", "declared", "u1")
	declared.NodeName = "n1"
	declared.Status = nil // stored BOUND
	c := mustCreate(t, s, declared, pendingPod("ns", "sched", "u2"), pendingPod("ns", "pending", "u3"), pendingPod("ns", "done", "u4"))
	p1, p2, p3, p4 := c[0].Pod, c[1].Pod, c[2].Pod, c[3].Pod
	r2 := mustUpdate(t, s, boundTo(p2, "n2"), c[1].Revision)
	r4 := mustUpdate(t, s, boundTo(p4, "n1"), c[3].Revision)
	mustUpdate(t, s, withPhase(boundTo(p4, "n1"), berthv1.PodPhase_POD_PHASE_SUCCEEDED), r4)

	events, stop := collect(t, s, 0)
	snapshot := []*berthv1.BindingEvent{
		ev(evBound, p1, "n1", c[0].Revision),
		ev(evBound, p2, "n2", r2),
	}
	if diff := cmp.Diff(snapshot, next(t, events, 2), protocmp.Transform()); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}

	// Live changes; the ones that are not binding changes must yield nothing.
	b3 := mustUpdate(t, s, boundTo(p3, "n3"), c[2].Revision)
	running := mustUpdate(t, s, withPhase(p1, berthv1.PodPhase_POD_PHASE_RUNNING), c[0].Revision)
	done := mustUpdate(t, s, withPhase(p1, berthv1.PodPhase_POD_PHASE_SUCCEEDED), running)
	del2, err := s.DeletePod(ctx, "ns", "sched", "")
	if err != nil {
		t.Fatal(err)
	}
	moved := boundTo(p3, "n4")
	moved.Uid = "u3b"
	mv := mustUpdate(t, s, moved, b3)
	back := mustUpdate(t, s, pendingPod("ns", "pending", "u3b"), mv)
	mustCreate(t, s, pendingPod("ns", "other", "u5")) // no event
	marker := mustCreate(t, s, boundTo(pendingPod("ns", "marker", "u6"), "n9"))[0]

	live := []*berthv1.BindingEvent{
		ev(evBound, p3, "n3", b3),
		ev(evUnbound, p1, "n1", done),
		ev(evUnbound, p2, "n2", del2),
		ev(evUnbound, p3, "n3", mv),
		ev(evBound, moved, "n4", mv),
		ev(evUnbound, moved, "n4", back),
		ev(evBound, marker.Pod, "n9", marker.Revision),
	}
	if diff := cmp.Diff(live, next(t, events, len(live)), protocmp.Transform()); diff != "" {
		t.Errorf("live events (-want +got):\n%s", diff)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
}

func TestWatchBindingsResume(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	start, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A history of binding events, with their revisions.
	var history []*berthv1.BindingEvent
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"), pendingPod("ns", "c", "uc"))
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n1"), c[0].Revision)
	history = append(history, ev(evBound, c[0].Pod, "n1", ra))
	// b and c bound in one Txn: two events at one revision.
	res := s.UpdatePods(ctx, []PodUpdate{
		{Pod: boundTo(c[1].Pod, "n2"), ExpectedModRevision: c[1].Revision},
		{Pod: boundTo(c[2].Pod, "n2"), ExpectedModRevision: c[2].Revision},
	})
	if res[0].Err != nil || res[1].Err != nil || res[0].Revision != res[1].Revision {
		t.Fatalf("joint bind: %+v", res)
	}
	history = append(history, ev(evBound, c[1].Pod, "n2", res[0].Revision), ev(evBound, c[2].Pod, "n2", res[0].Revision))
	da, err := s.DeletePod(ctx, "ns", "a", "ua")
	if err != nil {
		t.Fatal(err)
	}
	history = append(history, ev(evUnbound, c[0].Pod, "n1", da))
	rb := mustUpdate(t, s, withPhase(boundTo(c[1].Pod, "n2"), berthv1.PodPhase_POD_PHASE_FAILED), res[0].Revision)
	history = append(history, ev(evUnbound, c[1].Pod, "n2", rb))

	for i, tt := range []struct {
		name string
		from int64
	}{
		{"before everything", start},
		{"at the first event", ra},
		{"between events", ra + 1},
		{"at a revision with two events", res[0].Revision},
		{"at the last event", rb},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var want []*berthv1.BindingEvent
			for _, e := range history {
				if e.Revision > tt.from {
					want = append(want, e)
				}
			}
			events, stop := collect(t, s, tt.from)
			defer stop()
			// The marker, written after the watch started, must come right
			// after the history: nothing repeated, nothing extra.
			got := next(t, events, len(want))
			m := mustCreate(t, s, boundTo(pendingPod("ns", fmt.Sprintf("marker-%d", i), fmt.Sprintf("um-%d", i)), "n9"))[0]
			got = append(got, next(t, events, 1)...)
			markerEv := ev(evBound, m.Pod, "n9", m.Revision)
			want = append(want, markerEv)
			history = append(history, markerEv) // later watches see it too
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchBindingsFutureRevision(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	cur, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = s.WatchBindings(ctx, cur+1000, func(*berthv1.BindingEvent) error { return nil })
	if msg := errIs(err, ErrFutureRevision); msg != "" {
		t.Error(msg)
	}
}

func TestWatchBindingsEndsWithSendError(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	mustCreate(t, s, boundTo(pendingPod("ns", "a", "ua"), "n1"))
	boom := errors.New("client went away")
	err := s.WatchBindings(ctx, 0, func(*berthv1.BindingEvent) error { return boom })
	if err != boom {
		t.Errorf("got %v, want the send error itself", err)
	}
}

func TestWatchBindingsCompacted(t *testing.T) {
	e := ownEtcd(t, t.TempDir(), "")
	s := openStore(t, e)
	ctx := testCtx(t)
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"))
	old := c[0].Revision
	bound := mustUpdate(t, s, boundTo(c[0].Pod, "n1"), old)
	last := mustUpdate(t, s, withPhase(boundTo(c[0].Pod, "n1"), berthv1.PodPhase_POD_PHASE_RUNNING), bound)
	if _, err := s.Client().Compact(ctx, bound); err != nil {
		t.Fatal(err)
	}
	nop := func(*berthv1.BindingEvent) error { return nil }
	for _, from := range []int64{old, bound - 1} {
		err := s.WatchBindings(ctx, from, nop)
		var ce *CompactedError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCompacted) {
			t.Fatalf("from %d: %v, want a CompactedError", from, err)
		}
		if ce.CompactRevision != bound {
			t.Errorf("from %d: compact revision %d, want %d", from, ce.CompactRevision, bound)
		}
	}
	// From the compaction point itself everything after is still there.
	events, stop := collect(t, s, bound)
	defer stop()
	del, err := s.DeletePod(ctx, "ns", "a", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []*berthv1.BindingEvent{ev(evUnbound, c[0].Pod, "n1", del)}
	if diff := cmp.Diff(want, next(t, events, 1), protocmp.Transform()); diff != "" {
		t.Errorf("from the compact revision (-want +got):\n%s (last write %d)", diff, last)
	}
}
