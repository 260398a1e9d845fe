package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// anyShard returns one shard the member owns and its epoch.
func anyShard(t *testing.T, m *runningMember) (int, int64) {
	t.Helper()
	for i, epoch := range m.log.snapshot() {
		return i, epoch
	}
	t.Fatal("the member owns no shard")
	return 0, 0
}

func fencedBind(t *testing.T, s *Store, p *berthv1.Pod, rev int64, node string, view int64, shard int, epoch int64) UpdateResult {
	t.Helper()
	return s.Bind(testCtx(t), []Binding{{Pod: boundTo(p, node), ExpectedModRevision: rev, ViewRevision: view, Shard: shard, ShardEpoch: epoch}})[0]
}

// A replica holding every shard binds without bumping allocation keys, and
// still refuses a view that misses a pod declared on the node.
func TestSoloBindingsCompareWithoutBumping(t *testing.T) {
	const shards = 4
	a, _ := replicaPair(t)
	ma := startMember(t, a, "replica-a", shards, 5*time.Second)
	eventually(t, "a lone replica commits solo", func() bool {
		return exactlyOnce(shards, ma) && a.groupCommit.solo.current() != 0
	})
	shard, epoch := anyShard(t, ma)

	p, r := created(t, a, "solo")
	if res := fencedBind(t, a, p, r, "n1", current(t, a), shard, epoch); res.Err != nil {
		t.Fatalf("solo binding: %v", res.Err)
	}
	if rev := allocRev(t, a, "n1"); rev != 0 {
		t.Fatalf("a solo binding bumped n1's allocation key (at %d)", rev)
	}

	view := current(t, a)
	declared := mustCreate(t, a, boundTo(pendingPod("ns", "declared", "u-declared"), "n1"))[0]
	if rev := allocRev(t, a, "n1"); rev != declared.Revision {
		t.Fatalf("n1's allocation key at %d after a declared pod at %d", rev, declared.Revision)
	}
	q, rq := created(t, a, "after-declared")
	var stale *StaleViewError
	if res := fencedBind(t, a, q, rq, "n1", view, shard, epoch); !errors.As(res.Err, &stale) || stale.Revision != declared.Revision {
		t.Fatalf("solo binding with a view older than a declared pod: %v; want a StaleViewError at %d", res.Err, declared.Revision)
	}
	if res := fencedBind(t, a, q, rq, "n1", current(t, a), shard, epoch); res.Err != nil {
		t.Fatalf("solo binding with a fresh view: %v", res.Err)
	}
}

// Once a second replica holds a claim, a solo Txn fails its fence and is
// resent with its bump, and the new replica cannot bind with a view that
// predates its claim (which might miss the solo bindings).
func TestSoloEndsWhenAnotherReplicaClaimsAShard(t *testing.T) {
	const shards = 4
	a, b := replicaPair(t)
	ma := startMember(t, a, "replica-a", shards, 5*time.Second)
	eventually(t, "a commits solo", func() bool { return a.groupCommit.solo.current() != 0 })
	lease := a.groupCommit.solo.current()
	beforeB := current(t, a)

	mb := startMember(t, b, "replica-b", shards, 5*time.Second)
	eventually(t, "the shards split between a and b", func() bool {
		return exactlyOnce(shards, ma, mb) && len(ma.log.snapshot()) > 0 && len(mb.log.snapshot()) > 0
	})
	if a.groupCommit.solo.current() != 0 {
		t.Fatal("a still commits solo with b holding shards")
	}

	// A stale hint must not let a binding through unbumped.
	bindsBumpedDespiteHint(t, a, ma, lease, "after-b")
	if a.groupCommit.solo.current() != 0 {
		t.Fatal("a failed solo fence left the hint on")
	}

	// b's view from before its claim may miss a's solo bindings.
	shardB, epochB := anyShard(t, mb)
	q, rq := created(t, b, "b-old-view")
	var stale *StaleViewError
	if res := fencedBind(t, b, q, rq, "n2", beforeB, shardB, epochB); !errors.As(res.Err, &stale) || stale.Revision != epochB {
		t.Fatalf("binding with a view before the shard's claim: %v; want a StaleViewError at the claim %d", res.Err, epochB)
	}
	if res := fencedBind(t, b, q, rq, "n2", current(t, b), shardB, epochB); res.Err != nil {
		t.Fatalf("binding with a view after the claim: %v", res.Err)
	}
}

// A replica that has registered but claimed nothing yet already ends solo
// commits: the fence compares registrations, since a replica registers
// before it claims and its claims share its registration's lease.
func TestSoloEndsWhenAnotherReplicaRegisters(t *testing.T) {
	const shards = 4
	a, _ := replicaPair(t)
	ma := startMember(t, a, "replica-a", shards, 5*time.Second)
	eventually(t, "a commits solo", func() bool { return exactlyOnce(shards, ma) && a.groupCommit.solo.current() != 0 })
	lease := a.groupCommit.solo.current()

	grant, err := a.client.Grant(testCtx(t), 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.Put(testCtx(t), a.keys.replicaKey("replica-x"), "x", clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	// a gives up what replica-x should own; replica-x never claims it.
	eventually(t, "a keeps only its share", func() bool {
		owned := ma.log.snapshot()
		for i := range shards {
			_, has := owned[i]
			if has != (PreferredOwner([]string{"replica-a", "replica-x"}, i) == "replica-a") {
				return false
			}
		}
		return true
	})

	// Every claim that exists is a's, so only the registration can stop an
	// unbumped binding.
	bindsBumpedDespiteHint(t, a, ma, lease, "after-x")
}

// bindsBumpedDespiteHint tells a's committer it may commit solo under
// lease, binds a new pod named name to n1 in one of a's shards, and checks
// that the binding bumped n1's allocation key all the same: the solo Txn
// failed its fence and was resent the ordinary way.
func bindsBumpedDespiteHint(t *testing.T, a *Store, ma *runningMember, lease int64, name string) {
	t.Helper()
	a.groupCommit.solo.set(lease, true)
	shard, epoch := anyShard(t, ma)
	p, r := created(t, a, name)
	res := fencedBind(t, a, p, r, "n1", current(t, a), shard, epoch)
	if res.Err != nil {
		t.Fatalf("binding after a stale solo hint: %v", res.Err)
	}
	if rev := allocRev(t, a, "n1"); rev != res.Revision {
		t.Fatalf("n1's allocation key at %d, want the binding's revision %d: the solo Txn was not refused", rev, res.Revision)
	}
}

// appliedHandler records the newest revision Applied reported.
type appliedHandler struct {
	*recordingHandler
	applied atomic.Int64
}

func (h *appliedHandler) Applied(rev int64) { h.applied.Store(max(h.applied.Load(), rev)) }

// syncedWriteElsewhere runs a sync on a new store, then writes a key the
// sync does not watch (a shard's claim); it returns the store, the sync's
// handler and the revision of that write.
func syncedWriteElsewhere(t *testing.T) (*Store, *appliedHandler, int64) {
	t.Helper()
	s := openStore(t, sharedEtcd(t))
	h := &appliedHandler{recordingHandler: newRecordingHandler()}
	go func() {
		for range h.calls { // only Applied matters here
		}
	}()
	t.Cleanup(func() { close(h.calls) })
	runSync(t, s, h)
	eventually(t, "the sync's first view", func() bool { return h.applied.Load() > 0 })

	put, err := s.client.Put(testCtx(t), s.keys.shard(3), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	return s, h, put.Header.Revision
}

// A binding may need a view past a revision that changed nothing the sync
// watches (its shard's claim): asked for it, the sync shows it anyway.
func TestWantedViewShownWithoutAChange(t *testing.T) {
	s, h, claim := syncedWriteElsewhere(t)
	s.WantView(claim)
	eventually(t, "a view that reaches the claim", func() bool { return h.applied.Load() >= claim })
}

// AwaitView returns once the sync has shown the revision, though it changed
// nothing the sync watches, and gives up when its context ends first.
func TestAwaitView(t *testing.T) {
	s, h, rev := syncedWriteElsewhere(t)
	if err := s.AwaitView(testCtx(t), rev); err != nil || h.applied.Load() < rev {
		t.Fatalf("AwaitView(%d) = %v with the view at %d", rev, err, h.applied.Load())
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	if err := s.AwaitView(ctx, rev+1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AwaitView of a revision etcd has not reached = %v, want the context's deadline", err)
	}
}
