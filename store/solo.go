package store

import (
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A replica that holds every shard claim is the only scheduler that can
// commit anything, so its bindings need not bump allocation keys: those
// bumps exist for the other replicas, and there are none. It still compares
// each charged node's key (a pod declared with its node bumps it), and its
// own placements never overcommit each other because the cache assumes them.
// Skipping the bump saves a third of the keys a pod writes: etcd applies,
// indexes and, at every start, restores one revision fewer per binding.
//
// Two rules keep this safe when a second replica appears:
//
//  1. A solo Txn carries one range compare: every replica registration
//     that exists is held with this replica's lease, so no other replica is
//     registered. A replica registers before it claims a shard, and its
//     claims share its registration's lease, so they cannot outlive it
//     (one registering again under the same id revokes the lease of the
//     one before, or does not register): with no other registration there
//     is no other claim. Once another replica registers, the Txn fails,
//     the committer stops committing solo, and the units are resent with
//     their bumps.
//  2. A charge whose view is older than its shard claim (its fence epoch)
//     is refused with a StaleViewError at the epoch. A solo binding landed
//     only while nobody else was registered, so every claim taken since,
//     and every decision fenced by one, comes after it: a view that
//     includes the claim includes every binding the allocation key does
//     not show.
//
// The compare ranges over registrations rather than over the shard claims
// themselves, which say the same thing once rule 1's ordering holds: a
// lone replica has one registration and 64 claims, and etcd reads and
// decodes every key a compare ranges over, in every solo Txn. When
// bindings trickle in a Txn or two at a time, those 64 reads were most of
// etcd's work in applying them.

// soloFence is the committer's view of whether this replica commits solo.
type soloFence struct {
	// lease is the session lease while this replica holds every shard,
	// 0 otherwise. Membership sets it; a failed fence clears it.
	lease atomic.Int64
	// start and end bound the replica registrations' keys.
	start, end string
	metrics    *Metrics
}

func newSoloFence(k keyspace, m *Metrics) *soloFence {
	return &soloFence{start: k.replica, end: clientv3.GetPrefixRangeEnd(k.replica), metrics: m}
}

// current returns the lease to fence solo commits with, or 0: not solo.
func (f *soloFence) current() int64 {
	if f == nil {
		return 0
	}
	return f.lease.Load()
}

// set publishes whether this replica holds every shard under lease.
func (f *soloFence) set(lease int64, holdsAll bool) {
	if !holdsAll {
		lease = 0
	}
	if f.lease.Swap(lease) != lease {
		f.metrics.setSolo(lease != 0)
	}
}

// lost stops solo commits under lease after a Txn found another replica.
// Membership publishes again on its next ownership change.
func (f *soloFence) lost(lease int64) {
	if f.lease.CompareAndSwap(lease, 0) {
		f.metrics.soloLost()
	}
}

// compare holds while every existing registration is held with lease.
func (f *soloFence) compare(lease int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.LeaseValue(f.start), "=", lease).WithRange(f.end)
}

// read is the read of the registrations that tells, after a failed Txn,
// whether the solo compare held at rev.
func (f *soloFence) read(rev int64) clientv3.Op {
	return clientv3.OpGet(f.start, clientv3.WithRange(f.end), clientv3.WithRev(rev))
}

// held evaluates compare(lease) against the registrations read, as etcd
// does: no registration at all compares a lease of 0.
func (f *soloFence) held(registrations []*mvccpb.KeyValue, lease int64) bool {
	if len(registrations) == 0 {
		return lease == 0
	}
	for _, kv := range registrations {
		if kv.Lease != lease {
			return false
		}
	}
	return true
}
