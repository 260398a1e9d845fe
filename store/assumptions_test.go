package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// allocRev is the mod revision of a node's allocation key (0 if absent).
func allocRev(t *testing.T, s *Store, node string) int64 {
	t.Helper()
	resp, err := s.client.Get(testCtx(t), s.keys.allocation(node))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].ModRevision
}

func assumptionsOn(t *testing.T, s *Store) []Assumption {
	t.Helper()
	as, err := s.ListAssumptions(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// An assumption holds room like a binding: one whose view predates another
// replica's charge of the node, or whose shard claim is gone, is not
// written; a fresh one is, and charges the node.
func TestPutAssumptionsChargedAndFenced(t *testing.T) {
	a, b := replicaPair(t)
	pa, ra := created(t, a, "a")
	pw, rw := created(t, b, "w")
	view := current(t, a)
	first := a.Bind(testCtx(t), []Binding{{Pod: boundTo(pa, "n1"), ExpectedModRevision: ra, ViewRevision: view}})[0]
	if first.Err != nil {
		t.Fatal(first.Err)
	}

	w := Assumption{Namespace: "ns", Name: "w", UID: pw.Uid, Node: "n1", ViewRevision: view}
	err := b.PutAssumptions(testCtx(t), []Assumption{w})
	var stale *StaleViewError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &stale) || stale.Revision != first.Revision {
		t.Fatalf("stale assumption: %v; want a StaleViewError at %d", err, first.Revision)
	}
	if as := assumptionsOn(t, b); len(as) != 0 {
		t.Fatalf("a failed assumption was written: %+v", as)
	}
	if got := allocRev(t, b, "n1"); got != first.Revision {
		t.Fatalf("alloc/n1 at %d after a failed assumption, want %d", got, first.Revision)
	}

	fenced := w
	fenced.ViewRevision, fenced.Shard, fenced.ShardEpoch = current(t, b), 7, 1
	if err := b.PutAssumptions(testCtx(t), []Assumption{fenced}); !errors.Is(err, ErrConflict) {
		t.Fatalf("assumption without the shard claim: %v, want ErrConflict", err)
	}

	w.ViewRevision = current(t, b)
	if err := b.PutAssumptions(testCtx(t), []Assumption{w}); err != nil {
		t.Fatalf("fresh assumption: %v", err)
	}
	charged := allocRev(t, b, "n1")
	if charged <= first.Revision {
		t.Fatalf("alloc/n1 at %d after the assumption, want past %d", charged, first.Revision)
	}
	if as := assumptionsOn(t, b); len(as) != 1 || as[0].Node != "n1" || as[0].UID != pw.Uid {
		t.Fatalf("assumptions %+v, want w on n1", as)
	}
	// a, whose view predates the assumption, cannot bind to n1 now.
	pc, rc := created(t, a, "c")
	if err := bindOne(t, a, pc, rc, "n1", first.Revision); !errors.Is(err, ErrConflict) {
		t.Fatalf("binding past an assumption it did not see: %v, want ErrConflict", err)
	}

	// A second member assumed on n1 with a newer view; the gang's binding
	// still passes for the first, whose view is older than the second's
	// charge: its own assumption already holds its room.
	px, rx := created(t, b, "x")
	x := Assumption{Namespace: "ns", Name: "x", UID: px.Uid, Node: "n1", ViewRevision: current(t, b)}
	if err := b.PutAssumptions(testCtx(t), []Assumption{x}); err != nil {
		t.Fatalf("second assumption: %v", err)
	}
	if _, err := b.BindGang(testCtx(t), []Binding{
		{Pod: boundTo(pw, "n1"), ExpectedModRevision: rw, ViewRevision: w.ViewRevision},
		{Pod: boundTo(px, "n1"), ExpectedModRevision: rx, ViewRevision: x.ViewRevision},
	}); err != nil {
		t.Fatalf("gang binding over its own assumptions: %v", err)
	}
	if as := assumptionsOn(t, b); len(as) != 0 {
		t.Fatalf("assumptions left after the gang bound: %+v", as)
	}
}

// Assumptions carry the session lease: revoking it (the replica died)
// removes them, and nothing else ever does on a timer.
func TestAssumptionsLiveAndDieWithTheLease(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	lease, err := s.Client().Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	s.session.Store(&sessionInfo{id: "replica-a", lease: lease.ID})
	as := []Assumption{{Namespace: "ns", Name: "a", UID: "ua", Node: "n1"}, {Namespace: "ns", Name: "b", UID: "ub", Node: "n2"}}
	if err := s.PutAssumptions(ctx, as); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListAssumptions(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	want := []Assumption{{Namespace: "ns", Name: "a", UID: "ua", Node: "n1", Replica: "replica-a"}, {Namespace: "ns", Name: "b", UID: "ub", Node: "n2", Replica: "replica-a"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want,+got):\n%s", diff)
	}
	if err := s.DeleteAssumptions(ctx, as[:1]); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ListAssumptions(ctx, "ns"); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("after delete: %v, want only b", got)
	}
	if _, err := s.Client().Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ListAssumptions(ctx, "ns"); len(got) != 0 {
		t.Fatalf("after the lease ended: %v, want none", got)
	}
}

// Another replica's assumption (the shard moved) is not deleted.
func TestDeleteAssumptionsSparesOtherLeases(t *testing.T) {
	e := sharedEtcd(t)
	s := openStore(t, e)
	ctx := testCtx(t)
	theirs, err := s.Client().Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	s.session.Store(&sessionInfo{id: "them", lease: theirs.ID})
	a := []Assumption{{Namespace: "ns", Name: "a", UID: "u", Node: "n1"}}
	if err := s.PutAssumptions(ctx, a); err != nil {
		t.Fatal(err)
	}
	s.session.Store(nil) // now "we" hold no lease
	if err := s.DeleteAssumptions(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ListAssumptions(ctx, ""); len(got) != 1 || got[0].Replica != "them" {
		t.Fatalf("got %v, want their assumption kept", got)
	}
}

// BindGang binds every member in one revision and drops their assumptions
// in the same Txn.
func TestBindGangDropsAssumptionsInTheSameTxn(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	pods := []*berthv1.Pod{pendingPod("ns", "m1", "u1"), pendingPod("ns", "m2", "u2")}
	res := mustCreate(t, s, pods...)
	if err := s.PutAssumptions(ctx, []Assumption{{Namespace: "ns", Name: "m1", UID: "u1", Node: "n1"}}); err != nil {
		t.Fatal(err)
	}
	view, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var bs []Binding
	for i, p := range pods {
		bs = append(bs, Binding{Pod: boundTo(p, "n1"), ExpectedModRevision: res[i].Revision, ViewRevision: view})
	}
	rev, err := s.BindGang(ctx, bs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		got, mod, err := s.GetPod(ctx, "ns", p.Name)
		if err != nil || mod != rev || got.NodeName != "n1" {
			t.Fatalf("%s: node %q at %d (%v), want n1 at %d", p.Name, got.GetNodeName(), mod, err, rev)
		}
	}
	resp, err := s.Client().Get(ctx, s.keys.assume("ns", "m1"), clientv3.WithRev(rev-1))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("assumption before the bind: %v, %v", resp, err)
	}
	if got, _ := s.ListAssumptions(ctx, ""); len(got) != 0 {
		t.Fatalf("assumptions after the bind: %v", got)
	}
}
