package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// shardLog records what a member was told, like the scheduler would.
type shardLog struct {
	mu    sync.Mutex
	owned map[int]int64
}

func newShardLog() *shardLog { return &shardLog{owned: map[int]int64{}} }

func (l *shardLog) AcquireShard(i int, epoch int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owned[i] = epoch
}

func (l *shardLog) ReleaseShard(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.owned, i)
}

func (l *shardLog) snapshot() map[int]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]int64, len(l.owned))
	for k, v := range l.owned {
		out[k] = v
	}
	return out
}

type runningMember struct {
	log  *shardLog
	stop func()
}

func startMember(t *testing.T, s *Store, id string, shards int, ttl time.Duration) *runningMember {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := newShardLog()
	done := make(chan error, 1)
	go func() {
		done <- s.RunMembership(ctx, MembershipConfig{ID: id, Address: id + ":7070", TTL: ttl, Shards: shards}, log)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return &runningMember{log: log, stop: stop}
}

// exactlyOnce reports whether the members' shards partition 0..n-1.
func exactlyOnce(n int, members ...*runningMember) bool {
	seen := map[int]int{}
	for _, m := range members {
		for i := range m.log.snapshot() {
			seen[i]++
		}
	}
	if len(seen) != n {
		return false
	}
	for _, c := range seen {
		if c != 1 {
			return false
		}
	}
	return true
}

func TestMembershipSplitsShardsAndFailsOver(t *testing.T) {
	a, b := replicaPair(t)
	const shards = 16
	ma := startMember(t, a, "replica-a", shards, 5*time.Second)
	eventually(t, "a lone replica owns every shard", func() bool { return exactlyOnce(shards, ma) })
	mb := startMember(t, b, "replica-b", shards, 5*time.Second)
	eventually(t, "two replicas split the shards", func() bool {
		return exactlyOnce(shards, ma, mb) && len(ma.log.snapshot()) > 0 && len(mb.log.snapshot()) > 0
	})
	replicas, err := a.ListReplicas(testCtx(t))
	if err != nil || len(replicas) != 2 {
		t.Fatalf("ListReplicas: %v, %v", replicas, err)
	}
	for _, r := range replicas {
		want := ma.log.snapshot()
		if r.Id == "replica-b" {
			want = mb.log.snapshot()
		}
		if len(r.Shards) != len(want) {
			t.Errorf("%s lists %d shards, owns %d", r.Id, len(r.Shards), len(want))
		}
	}
	// Every epoch is the create revision of a live claim.
	for i, epoch := range mb.log.snapshot() {
		kv, err := b.getKV(testCtx(t), "read claim", b.keys.shard(i))
		if err != nil || kv == nil || kv.CreateRevision != epoch || string(kv.Value) != "replica-b" {
			t.Fatalf("shard %d: claim %v, epoch %d (%v)", i, kv, epoch, err)
		}
	}
	// Leaving (its lease revoked on the way out) hands everything over.
	mb.stop()
	if got := mb.log.snapshot(); len(got) != 0 {
		t.Fatalf("stopped member still owns %v", got)
	}
	eventually(t, "the survivor owns every shard", func() bool { return exactlyOnce(shards, ma) })
}

// A replica restarted under the same id takes its shards back at once,
// without waiting for its previous incarnation's lease to expire.
func TestMembershipRestartRevokesPreviousIncarnation(t *testing.T) {
	a, _ := replicaPair(t)
	ctx := testCtx(t)
	const shards = 8
	// What a kill -9 leaves behind: a registration and claims on a lease
	// that nobody renews but that would live for a minute.
	lease, err := a.client.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	ops := []clientv3.Op{clientv3.OpPut(a.keys.replicaKey("replica-a"), "", clientv3.WithLease(lease.ID))}
	for i := range shards {
		ops = append(ops, clientv3.OpPut(a.keys.shard(i), "replica-a", clientv3.WithLease(lease.ID)))
	}
	if _, err := a.client.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	m := startMember(t, a, "replica-a", shards, 5*time.Second)
	eventually(t, "the restarted replica owns every shard", func() bool { return exactlyOnce(shards, m) })
	ttl, err := a.client.TimeToLive(ctx, lease.ID)
	if err != nil || ttl.TTL > 0 {
		t.Fatalf("old lease still alive: ttl %d, %v", ttl.TTL, err)
	}
}

// A replica whose lease is gone (here revoked behind its back, as when
// etcd expires it during a partition) stops owning at once and comes back
// with a new session.
func TestMembershipLostLeaseReleasesThenRejoins(t *testing.T) {
	a, _ := replicaPair(t)
	const shards = 8
	m := startMember(t, a, "replica-a", shards, 5*time.Second)
	eventually(t, "owns every shard", func() bool { return exactlyOnce(shards, m) })
	before := m.log.snapshot()
	lease := a.SessionLease()
	if lease == 0 {
		t.Fatal("no session lease")
	}
	if _, err := a.client.Revoke(testCtx(t), lease); err != nil {
		t.Fatal(err)
	}
	eventually(t, "shards reclaimed under a new session", func() bool {
		now := m.log.snapshot()
		if len(now) != shards || a.SessionLease() == lease {
			return false
		}
		for i, epoch := range now {
			if epoch == before[i] {
				return false
			}
		}
		return true
	})
}

func TestMembershipRejectsBadConfig(t *testing.T) {
	a, _ := replicaPair(t)
	for _, cfg := range []MembershipConfig{{ID: "", Shards: 4}, {ID: "a/b", Shards: 4}, {ID: "a", Shards: 0}} {
		err := a.RunMembership(testCtx(t), cfg, newShardLog())
		if errIs(err, ErrInvalidArgument) != "" {
			t.Errorf("%+v: %v", cfg, fmt.Sprint(err))
		}
	}
}

// rendezvous spreads shards over replicas and moves only the shards of a
// replica that leaves.
func TestRendezvousMovesOnlyTheLeaversShards(t *testing.T) {
	three := []string{"r1", "r2", "r3"}
	two := []string{"r1", "r3"}
	count := map[string]int{}
	for i := range 64 {
		w3 := rendezvous(three, i)
		count[w3]++
		if w3 != "r2" && rendezvous(two, i) != w3 {
			t.Errorf("shard %d moved from %s though only r2 left", i, w3)
		}
	}
	for _, id := range three {
		if count[id] < 10 {
			t.Errorf("%s wins only %d of 64 shards: %v", id, count[id], count)
		}
	}
}
