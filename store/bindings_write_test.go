package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// replicaPair opens two stores on one prefix: two replicas of one cluster.
func replicaPair(t *testing.T) (a, b *Store) {
	e := sharedEtcd(t)
	a = openStore(t, e)
	b = openStore(t, e, func(c *Config) { c.Prefix = a.cfg.Prefix })
	return a, b
}

// created stores a pending pod and returns it with its revision.
func created(t *testing.T, s *Store, name string) (*berthv1.Pod, int64) {
	t.Helper()
	res := mustCreate(t, s, pendingPod("ns", name, "u-"+name))
	return res[0].Pod, res[0].Revision
}

func bindOne(t *testing.T, s *Store, p *berthv1.Pod, rev int64, node string, view int64) error {
	t.Helper()
	return s.Bind(testCtx(t), []Binding{{Pod: boundTo(p, node), ExpectedModRevision: rev, ViewRevision: view}})[0].Err
}

func current(t *testing.T, s *Store) int64 {
	t.Helper()
	rev, err := s.CurrentRevision(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// A replica whose view predates another replica's binding to the node must
// not bind there: it never saw that pod, so its placement may overcommit.
func TestBindFailsWhenAnotherReplicaChargedTheNode(t *testing.T) {
	a, b := replicaPair(t)
	pa, ra := created(t, a, "a")
	pb, rb := created(t, b, "b")
	view := current(t, a)

	first := a.Bind(testCtx(t), []Binding{{Pod: boundTo(pa, "n1"), ExpectedModRevision: ra, ViewRevision: view}})[0]
	if first.Err != nil {
		t.Fatalf("first binding: %v", first.Err)
	}
	err := bindOne(t, b, pb, rb, "n1", view)
	var stale *StaleViewError
	if !errors.As(err, &stale) || !errors.Is(err, ErrConflict) || stale.Revision != first.Revision {
		t.Fatalf("stale view on a charged node: %v; want a StaleViewError at revision %d", err, first.Revision)
	}
	// Another node is untouched: the same view binds there.
	if err := bindOne(t, b, pb, rb, "n2", view); err != nil {
		t.Fatalf("binding to an uncharged node: %v", err)
	}
	// With a view that includes a's binding, n1 is fine again.
	pc, rc := created(t, b, "c")
	if err := bindOne(t, b, pc, rc, "n1", current(t, b)); err != nil {
		t.Fatalf("fresh view: %v", err)
	}
}

// A replica's own bindings to one node chain: the second one need not wait
// for the watch to bring back the first. A write by anyone else breaks the
// chain for views that did not see it.
func TestBindChainsOwnCommitsButNotOthers(t *testing.T) {
	a, b := replicaPair(t)
	view := current(t, a)
	for i := range 3 {
		p, r := created(t, a, fmt.Sprintf("own-%d", i))
		if err := bindOne(t, a, p, r, "n1", view); err != nil {
			t.Fatalf("own binding %d with the same view: %v", i, err)
		}
	}
	// b declares a running pod on n1: a's old view does not know it.
	declared := boundTo(pendingPod("ns", "declared", "u-declared"), "n1")
	res := mustCreate(t, b, declared)
	p, r := created(t, a, "after")
	if err := bindOne(t, a, p, r, "n1", view); errIs(err, ErrConflict) != "" {
		t.Fatalf("old view after a foreign pod: %v", err)
	}
	if err := bindOne(t, a, p, r, "n1", res[0].Revision); err != nil {
		t.Fatalf("view that includes the foreign pod: %v", err)
	}
}

// Many bindings to one node at once share Txns and all land.
func TestBindManyToOneNode(t *testing.T) {
	a, _ := replicaPair(t)
	const n = 64
	pods := make([]*berthv1.Pod, n)
	revs := make([]int64, n)
	for i := range n {
		pods[i], revs[i] = created(t, a, fmt.Sprintf("p%d", i))
	}
	view := current(t, a)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.Bind(testCtx(t), []Binding{{Pod: boundTo(pods[i], "n1"), ExpectedModRevision: revs[i], ViewRevision: view}})[0].Err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("binding %d: %v", i, err)
		}
	}
	if txns := a.groupCommit.txns.Load(); txns >= n+n {
		t.Errorf("%d Txns for %d creates and %d bindings: bindings did not share Txns", txns, n, n)
	}
}

// The fence: a binding carries the epoch of the shard claim it was made
// under, and fails once that claim is gone or replaced.
func TestBindFencedByShardClaim(t *testing.T) {
	a, _ := replicaPair(t)
	ctx := testCtx(t)
	key := a.keys.shard(7)
	put, err := a.client.Put(ctx, key, "a")
	if err != nil {
		t.Fatal(err)
	}
	epoch := put.Header.Revision
	p, r := created(t, a, "fenced")
	bind := func(epoch int64) error {
		return a.Bind(ctx, []Binding{{Pod: boundTo(p, "n1"), ExpectedModRevision: r, ViewRevision: current(t, a), Shard: 7, ShardEpoch: epoch}})[0].Err
	}
	if err := bind(epoch + 1000); errIs(err, ErrConflict) != "" {
		t.Fatalf("wrong epoch: %v", err)
	}
	if _, err := a.client.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.Put(ctx, key, "b"); err != nil {
		t.Fatal(err)
	}
	if err := bind(epoch); errIs(err, ErrConflict) != "" {
		t.Fatalf("claim replaced since the epoch: %v", err)
	}
	kv, _ := a.getKV(ctx, "read claim", key)
	if err := bind(kv.CreateRevision); err != nil {
		t.Fatalf("current claim: %v", err)
	}
}

// A gang binds all together or not at all.
func TestBindAllIsAllOrNothing(t *testing.T) {
	a, _ := replicaPair(t)
	ctx := testCtx(t)
	var gang []Binding
	for i := range 3 {
		p, r := created(t, a, fmt.Sprintf("g%d", i))
		gang = append(gang, Binding{Pod: boundTo(p, fmt.Sprintf("n%d", i%2)), ExpectedModRevision: r, ViewRevision: current(t, a)})
	}
	stale := gang[2]
	stale.ExpectedModRevision--
	if _, err := a.BindAll(ctx, []Binding{gang[0], gang[1], stale}); errIs(err, ErrConflict) != "" {
		t.Fatalf("gang with a stale member: %v", err)
	}
	for _, b := range gang {
		got, _, err := a.GetPod(ctx, "ns", b.Pod.Name)
		if err != nil || got.NodeName != "" {
			t.Fatalf("%s after a failed gang commit: %v %v", b.Pod.Name, got, err)
		}
	}
	marker := a.cfg.Prefix + "/v1/test-marker/g0"
	rev, err := a.BindAll(ctx, gang, marker)
	if err != nil {
		t.Fatalf("gang: %v", err)
	}
	for _, b := range gang {
		_, modRev, err := a.GetPod(ctx, "ns", b.Pod.Name)
		if err != nil || modRev != rev {
			t.Fatalf("%s: revision %d, want the gang's %d (%v)", b.Pod.Name, modRev, rev, err)
		}
	}
}
