package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// etcdWatchers reads the embedded etcd's count of server-side watchers.
func etcdWatchers(t *testing.T) float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "etcd_debugging_mvcc_watcher_total" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("etcd_debugging_mvcc_watcher_total not registered")
	return 0
}

// bindMany creates n pods already bound, one revision each, and returns
// their BOUND events.
func bindMany(t *testing.T, s *Store, prefix string, n int) []*berthv1.BindingEvent {
	t.Helper()
	var want []*berthv1.BindingEvent
	for i := range n {
		p := boundTo(pendingPod("ns", fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s-u%d", prefix, i)), "n1")
		r := mustCreate(t, s, p)[0]
		want = append(want, ev(evBound, r.Pod, "n1", r.Revision))
	}
	return want
}

func TestFanoutSubscribersShareOneEtcdWatch(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	// The hub starts with the first subscriber; later ones join its ring.
	// The first binding can reach that subscriber through its listing,
	// before the hub's etcd watch exists; the second, written once the
	// first was received, reaches it after the listing, when the hub's
	// watch is in place to be counted in before.
	warm, _ := collect(t, s, 0)
	next(t, warm, len(bindMany(t, s, "warm", 1)))
	warmed := bindMany(t, s, "warm-again", 1)
	next(t, warm, len(warmed))
	// From the revision the hub has delivered, not etcd's current one: a
	// write elsewhere in the shared etcd could put that past what the hub
	// covers, and a subscriber from there rightly catches up on a watch.
	from := warmed[len(warmed)-1].Revision
	before := etcdWatchers(t)
	const subscribers = 200
	chans := make([]<-chan *berthv1.BindingEvent, subscribers)
	for i := range chans {
		chans[i], _ = collect(t, s, from)
	}
	want := bindMany(t, s, "shared", 5)
	for i, ch := range chans {
		if diff := cmp.Diff(want, next(t, ch, len(want)), protocmp.Transform()); diff != "" {
			t.Fatalf("subscriber %d (-want +got):\n%s", i, diff)
		}
	}
	// Joining the ring costs no etcd watch at all.
	if added := etcdWatchers(t) - before; added > 0 {
		t.Fatalf("%d subscribers added %v etcd watchers, want none", subscribers, added)
	}
}

func TestFanoutSlowSubscriberIsCutOffAndResumesOnceInOrder(t *testing.T) {
	s := openStore(t, sharedEtcd(t), func(c *Config) { c.WatchBuffer = 8 })
	ctx := testCtx(t)
	// With the hub running first, the subscriber reads the ring, not a
	// catch-up watch of its own. A warm-up subscriber does not ensure that:
	// one that takes its event from the listing and leaves at once never
	// starts the hub, and a hub started after from would send the
	// subscriber through a catch-up watch, which no ring cuts off.
	if _, err := s.hub(ctx); err != nil {
		t.Fatal(err)
	}
	from, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The subscriber takes its first event, then stalls until released.
	var got []*berthv1.BindingEvent
	stalled, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.FollowBindings(ctx, from, func(ev *berthv1.BindingEvent) error {
			got = append(got, ev)
			if len(got) == 1 {
				close(stalled)
				<-release
			}
			return nil
		})
	}()
	want := bindMany(t, s, "slow", 1)
	<-stalled
	want = append(want, bindMany(t, s, "slow-more", 30)...)
	eventually(t, "the ring to drop the stalled subscriber's next event", func() bool {
		h, err := s.hub(ctx)
		return err == nil && h.coveredRev() > want[1].Revision
	})
	close(release)
	var behind *FellBehindError
	if err := <-done; !errors.As(err, &behind) {
		t.Fatalf("stalled subscriber ended with %v, want a FellBehindError", err)
	}
	if behind.Resume != got[len(got)-1].Revision {
		t.Fatalf("resume from %d, want the last delivered revision %d", behind.Resume, got[len(got)-1].Revision)
	}
	// The resume predates the ring: it catches up from etcd, then joins.
	ch, _ := collect(t, s, behind.Resume)
	got = append(got, next(t, ch, len(want)-len(got))...)
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("events across the cut-off (-want +got):\n%s", diff)
	}
	// And it keeps following live events from the ring.
	live := bindMany(t, s, "slow-live", 2)
	if diff := cmp.Diff(live, next(t, ch, 2), protocmp.Transform()); diff != "" {
		t.Fatalf("live events after the catch-up (-want +got):\n%s", diff)
	}
}

func TestFanoutCutsOffASendThatNeverReturns(t *testing.T) {
	s := openStore(t, sharedEtcd(t), func(c *Config) { c.WatchMaxLag = 50 * time.Millisecond })
	ctx := testCtx(t)
	from, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	defer close(unblock)
	done := make(chan error, 1)
	go func() {
		done <- s.FollowBindings(ctx, from, func(*berthv1.BindingEvent) error {
			<-unblock // a client that stopped reading
			return nil
		})
	}()
	bindMany(t, s, "stuck", 1)
	select {
	case err := <-done:
		var behind *FellBehindError
		if !errors.As(err, &behind) || behind.Resume != from {
			t.Fatalf("got %v, want a FellBehindError resuming from %d", err, from)
		}
	case <-ctx.Done():
		t.Fatal("a subscriber stuck in send was never cut off")
	}
}

func TestFanoutCancelledSubscribersLeaveNothingBehind(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	from, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The hub and its etcd watch run for the store's life: let them start
	// before counting, so only the subscribers' goroutines are measured.
	warm, stopWarm := collect(t, s, from)
	next(t, warm, len(bindMany(t, s, "warm", 1)))
	stopWarm()
	baseline := runtime.NumGoroutine()
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.FollowBindings(sctx, from, func(*berthv1.BindingEvent) error { return nil })
		}()
	}
	bindMany(t, s, "cancel", 1)
	cancel()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+5 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines, baseline %d:\n%s", runtime.NumGoroutine(), baseline, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A listing or catch-up can run ahead of the hub's own watch; the events it
// delivered then reach the ring after the subscriber's cursor and must not
// be delivered twice.
func TestFanoutSkipsWhatTheJoinAlreadyDelivered(t *testing.T) {
	h := newTestHub(8, time.Hour, fanoutBatch)
	appendRevisions(h, 5, 6, 6, 7)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []int64
	done := make(chan error, 1)
	// The cursor sits before revision 5, as if the hub lagged when the
	// subscriber joined at revision 6.
	go func() {
		done <- h.deliver(ctx, 0, 6, func(ev *berthv1.BindingEvent) error {
			got = append(got, ev.Revision)
			if ev.Revision == 8 {
				cancel()
			}
			return nil
		})
	}()
	appendRevisions(h, 8)
	<-done
	if fmt.Sprint(got) != "[7 8]" {
		t.Fatalf("delivered revisions %v, want [7 8]", got)
	}
}

// A subscriber that joins at old events (a resume, a catch-up) is not
// behind for reading them: the lag bound counts from when it joined.
func TestFanoutLagCountsFromTheJoin(t *testing.T) {
	h := newTestHub(8, time.Minute, fanoutBatch)
	appendRevisions(h, 1, 2, 3)
	for i := range h.n {
		h.at(i).at = time.Now().Add(-time.Hour) // arrived long before the subscriber
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []int64
	err := h.deliver(ctx, 0, 0, func(ev *berthv1.BindingEvent) error {
		got = append(got, ev.Revision)
		if ev.Revision == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("delivered %v and ended with %v, want [1 2 3] and the cancel", got, err)
	}
}

// newTestHub is a hub with no etcd watch behind it: tests append to it.
func newTestHub(size int, maxLag time.Duration, batch int) *bindingHub {
	return &bindingHub{s: &Store{}, size: size, maxLag: maxLag, batch: batch,
		ring: make([]ringEntry, size), wake: make(chan struct{})}
}

// appendRevisions appends one event per revision given, a run of equal
// revisions as one revision's events, as the hub's watch does.
func appendRevisions(h *bindingHub, revs ...int64) {
	for i := 0; i < len(revs); {
		j := i
		var evs []*berthv1.BindingEvent
		for ; j < len(revs) && revs[j] == revs[i]; j++ {
			evs = append(evs, &berthv1.BindingEvent{Name: fmt.Sprint(j), Revision: revs[j]})
		}
		h.appendRevision(evs)
		i = j
	}
}

// A subscriber cut off inside a revision (its batch ended there) resumes
// from the revision before: it may see some of that revision's events
// again, but none of the rest is skipped.
func TestFanoutCutOffInsideARevisionResumesBeforeIt(t *testing.T) {
	h := newTestHub(4, time.Hour, 2)
	appendRevisions(h, 5, 5, 5)
	stalled, release := make(chan struct{}), make(chan struct{})
	var got []string
	done := make(chan error, 1)
	go func() {
		done <- h.deliver(context.Background(), 0, 4, func(ev *berthv1.BindingEvent) error {
			got = append(got, ev.Name)
			if len(got) == 1 {
				close(stalled)
				<-release
			}
			return nil
		})
	}()
	<-stalled // holding events 0 and 1 of revision 5; event 2 is still in the ring
	appendRevisions(h, 6, 7, 8, 9)
	close(release)
	var behind *FellBehindError
	if err := <-done; !errors.As(err, &behind) {
		t.Fatalf("ended with %v, want a FellBehindError", err)
	}
	if fmt.Sprint(got) != "[0 1]" || behind.Resume != 4 {
		t.Fatalf("delivered %v then resumed from %d; want [0 1] and 4, before the revision cut", got, behind.Resume)
	}
}

// A send stuck inside a revision resumes from the revision before it;
// one stuck on a revision's first event, from the revision before too,
// which it had whole.
func TestSendTrackerResumesFromTheLastWholeRevision(t *testing.T) {
	tr := &sendTracker{resume: 4, last: 4}
	var during []int64
	send := func(*berthv1.BindingEvent) error {
		_, resume := tr.get()
		during = append(during, resume)
		return nil
	}
	for _, rev := range []int64{5, 5, 6, 7, 7} {
		if err := tr.send(send, &berthv1.BindingEvent{Revision: rev}); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(during) != "[4 4 5 6 6]" {
		t.Fatalf("resume revisions during each send %v, want [4 4 5 6 6]", during)
	}
}

// The hub's watch hands over one write binding several pods as one
// revision, whole, for the ring to take at once: a subscriber reading at
// the ring's head then never holds part of a revision.
func TestBindingWatchHandsOverWholeRevisions(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	from, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pods []*berthv1.Pod
	for i := range 3 {
		pods = append(pods, boundTo(pendingPod("ns", fmt.Sprintf("whole-%d", i), fmt.Sprintf("whole-u%d", i)), "n1"))
	}
	res := mustCreate(t, s, pods...)
	single := bindMany(t, s, "single", 1)
	var handed [][]int64
	after := from
	err = s.watchBindingsFrom(ctx, from+1, &after, func(evs []*berthv1.BindingEvent) error {
		var revs []int64
		for _, ev := range evs {
			revs = append(revs, ev.Revision)
		}
		handed = append(handed, revs)
		if len(handed) == 2 {
			cancel()
		}
		return nil
	})
	if ctx.Err() == nil {
		t.Fatalf("watch ended with %v", err)
	}
	w, one := res[0].Revision, single[0].Revision
	if want := fmt.Sprint([][]int64{{w, w, w}, {one}}); fmt.Sprint(handed) != want {
		t.Fatalf("handed over %v, want %s", handed, want)
	}
}
