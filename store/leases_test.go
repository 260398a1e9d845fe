package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// unreachable reads a node and reports its unreachable flag as GetNode
// would.
func unreachable(t *testing.T, s *Store, name string) bool {
	t.Helper()
	n, err := s.GetNode(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FillUnreachable(testCtx(t), n); err != nil {
		t.Fatal(err)
	}
	return n.GetUnreachable()
}

func TestNodeLeaseExpiresAndRenews(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1", LeaseTtlSeconds: 2, Unreachable: true}); err != nil {
		t.Fatal(err)
	}
	if unreachable(t, s, "n1") {
		t.Fatal("a node just upserted with a lease is unreachable")
	}
	if n, _ := s.GetNode(ctx, "n1"); n.GetUnreachable() {
		t.Fatal("the output-only unreachable field was stored")
	}
	ttl, restored, err := s.RenewNodeLease(ctx, "n1")
	if err != nil || restored || ttl < 1 || ttl > 2 {
		t.Fatalf("renew a live lease = %d, %v, %v; want ttl 1-2, not restored", ttl, restored, err)
	}
	eventually(t, "the lease to expire", func() bool { return unreachable(t, s, "n1") })
	ttl, restored, err = s.RenewNodeLease(ctx, "n1")
	if err != nil || !restored || ttl != 2 {
		t.Fatalf("renew an expired lease = %d, %v, %v; want ttl 2, restored", ttl, restored, err)
	}
	if unreachable(t, s, "n1") {
		t.Fatal("still unreachable after renewal")
	}

	// Dropping the TTL drops the lease: nothing to expire or renew.
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	if id, err := s.leaseOf(ctx, "n1"); err != nil || id != 0 {
		t.Fatalf("lease after TTL 0: %v, %v; want none", id, err)
	}
	if unreachable(t, s, "n1") {
		t.Fatal("a node without lease TTL is unreachable")
	}
	if _, _, err := s.RenewNodeLease(ctx, "n1"); !errors.Is(err, ErrNoLease) {
		t.Fatalf("renew without TTL: %v, want ErrNoLease", err)
	}
	if _, _, err := s.RenewNodeLease(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renew of a missing node: %v, want ErrNotFound", err)
	}
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n2", LeaseTtlSeconds: MaxNodeLeaseTTL + 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TTL above the maximum: %v, want ErrInvalidArgument", err)
	}
}

func TestNodeLeaseReplacedOnUpsert(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1", LeaseTtlSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	first, _ := s.leaseOf(ctx, "n1")
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1", LeaseTtlSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	second, _ := s.leaseOf(ctx, "n1")
	if first == 0 || second == 0 || first == second {
		t.Fatalf("leases %x then %x; want a new one", first, second)
	}
	// The first lease, holding no key, was revoked.
	if ttl, err := s.Client().TimeToLive(ctx, first); err != nil || ttl.TTL != -1 {
		t.Fatalf("old lease: ttl %v, %v; want revoked (-1)", ttl, err)
	}
	if _, err := s.DeleteNodeWithLease(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if id, _ := s.leaseOf(ctx, "n1"); id != 0 {
		t.Fatalf("lease key left after delete: %x", id)
	}
	if _, err := s.DeleteNodeWithLease(ctx, "n1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
}

// leaseRecorder is a recordingHandler that is also told about leases.
type leaseRecorder struct {
	*recordingHandler
	revisions map[string]int64
}

func (h *leaseRecorder) NodeLeasesReset(leased []string, nodeRevisions map[string]int64) {
	h.revisions = nodeRevisions
	h.calls <- call{Kind: "NodeLeasesReset", Names: leased}
}

func (h *leaseRecorder) NodeLeasePut(name string, rev int64) {
	h.calls <- call{Kind: "NodeLeasePut", Rev: rev, Names: []string{name}}
}

func (h *leaseRecorder) NodeLeaseDeleted(name string, rev int64) {
	h.calls <- call{Kind: "NodeLeaseDeleted", Rev: rev, Names: []string{name}}
}

// Sync reports leases in the order the store promises: put before the
// record that starts them, deleted after the record that drops them, and
// deleted alone when they expire.
func TestSyncNodeLeases(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	r1, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1", LeaseTtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	h := &leaseRecorder{recordingHandler: newRecordingHandler()}
	runSync(t, s, h)
	got := h.next(t, 2)
	if got[0].Kind != "NodeLeasesReset" || !cmp.Equal(got[0].Names, []string{"n1"}) || got[1].Kind != "Reset" {
		t.Fatalf("listing calls %+v, want NodeLeasesReset [n1] then Reset", got)
	}
	if diff := cmp.Diff(map[string]int64{"n1": r1, "n2": r2}, h.revisions); diff != "" {
		t.Errorf("node revisions (-want +got):\n%s", diff)
	}

	r3, _ := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n3", LeaseTtlSeconds: 60})
	r4, _ := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1"})
	r5, _ := s.DeleteNodeWithLease(ctx, "n3")
	r6, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n4", LeaseTtlSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []call{
		{Kind: "NodeLeasePut", Rev: r3, Names: []string{"n3"}},
		{Kind: "NodePut", Rev: r3, Names: []string{"n3"}},
		{Kind: "NodePut", Rev: r4, Names: []string{"n1"}},
		{Kind: "NodeLeaseDeleted", Rev: r4, Names: []string{"n1"}},
		{Kind: "NodeDeleted", Rev: r5, Names: []string{"n3"}},
		{Kind: "NodeLeaseDeleted", Rev: r5, Names: []string{"n3"}},
		{Kind: "NodeLeasePut", Rev: r6, Names: []string{"n4"}},
		{Kind: "NodePut", Rev: r6, Names: []string{"n4"}},
	}
	if diff := cmp.Diff(want, h.next(t, len(want))); diff != "" {
		t.Fatalf("live calls (-want +got):\n%s", diff)
	}
	expired := h.next(t, 1)[0] // the lease of n4 expires
	if expired.Kind != "NodeLeaseDeleted" || !cmp.Equal(expired.Names, []string{"n4"}) || expired.Rev <= r6 {
		t.Fatalf("after expiry: %+v, want NodeLeaseDeleted n4 after %d", expired, r6)
	}
}

// WatchBindings reports an expiry once per node, at the deletion of its
// lease key, but not a lease dropped or deleted with its node; and a pod
// marked node_lost, rejected or finished with what happened.
//
// Long because it is one story on one stream: each step's events are
// checked against the ones before it.
func TestWatchBindingsNodeLost(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	start, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n1", LeaseTtlSeconds: 2}); err != nil {
		t.Fatal(err)
	}
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n1"), c[0].Revision)
	rb := mustUpdate(t, s, boundTo(c[1].Pod, "n1"), c[1].Revision)
	// Leases that end with their node's record are no expiry.
	for _, n := range []*berthv1.Node{{Name: "n2", LeaseTtlSeconds: 60}, {Name: "n2"}} {
		if _, err := s.PutNodeWithLease(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutNodeWithLease(ctx, &berthv1.Node{Name: "n3", LeaseTtlSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteNodeWithLease(ctx, "n3"); err != nil {
		t.Fatal(err)
	}

	events, stop := collect(t, s, start)
	defer stop()
	got := next(t, events, 3)
	lost := got[2]
	want := []*berthv1.BindingEvent{
		ev(evBound, c[0].Pod, "n1", ra),
		ev(evBound, c[1].Pod, "n1", rb),
		{Type: berthv1.BindingEventType_BINDING_EVENT_TYPE_NODE_LOST, NodeName: "n1", Revision: lost.GetRevision(), Message: "node n1 lease expired"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	marked := boundTo(c[0].Pod, "n1")
	marked.Status.NodeLost = true
	rl := mustUpdate(t, s, marked, ra)
	rejected := clonePod(c[1].Pod)
	rejected.Status.Rejections = []*berthv1.NodeRejection{{NodeName: "n1", NodeRevision: 3, Reason: "image pull failed"}}
	rr := mustUpdate(t, s, rejected, rb)
	finished := withPhase(marked, berthv1.PodPhase_POD_PHASE_FAILED)
	finished.Status.Message = "exit 1"
	rf := mustUpdate(t, s, finished, rl)
	podLost := ev(berthv1.BindingEventType_BINDING_EVENT_TYPE_NODE_LOST, c[0].Pod, "n1", rl)
	podLost.Message = "node n1 lost its lease"
	unboundRejected := ev(evUnbound, c[1].Pod, "n1", rr)
	unboundRejected.Message = "image pull failed"
	unboundFinished := ev(evUnbound, c[0].Pod, "n1", rf)
	unboundFinished.Message = "exit 1"
	live := []*berthv1.BindingEvent{podLost, unboundRejected, unboundFinished}
	if diff := cmp.Diff(live, next(t, events, len(live)), protocmp.Transform()); diff != "" {
		t.Fatalf("pod events (-want +got):\n%s", diff)
	}

	// A watch resumed anywhere in this history sees the same events after
	// its revision, once each, then nothing more than a marker written now.
	history := append(want, live...)
	for i, from := range []int64{start, rb, lost.GetRevision() - 1, lost.GetRevision()} {
		events, stop := collect(t, s, from)
		var wantFrom []*berthv1.BindingEvent
		for _, e := range history {
			if e.GetRevision() > from {
				wantFrom = append(wantFrom, e)
			}
		}
		gotFrom := next(t, events, len(wantFrom))
		m := mustCreate(t, s, boundTo(pendingPod("ns", fmt.Sprintf("marker-%d", i), fmt.Sprintf("um-%d", i)), "n9"))[0]
		gotFrom = append(gotFrom, next(t, events, 1)...)
		markerEv := ev(evBound, m.Pod, "n9", m.Revision)
		wantFrom = append(wantFrom, markerEv)
		history = append(history, markerEv)
		if diff := cmp.Diff(wantFrom, gotFrom, protocmp.Transform()); diff != "" {
			t.Errorf("from %d (-want +got):\n%s", from, diff)
		}
		stop()
	}
}

// A from-0 listing shows a pod already marked node_lost as such.
func TestWatchBindingsListsNodeLost(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"))[0]
	marked := boundTo(c.Pod, "n1")
	marked.Status.NodeLost = true
	r := mustUpdate(t, s, marked, c.Revision)
	events, stop := collect(t, s, 0)
	defer stop()
	lost := ev(berthv1.BindingEventType_BINDING_EVENT_TYPE_NODE_LOST, c.Pod, "n1", r)
	lost.Message = "node n1 lost its lease"
	want := []*berthv1.BindingEvent{ev(evBound, c.Pod, "n1", r), lost}
	if diff := cmp.Diff(want, next(t, events, 2), protocmp.Transform()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
