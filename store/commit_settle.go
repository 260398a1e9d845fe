package store

import (
	"bytes"
	"cmp"
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// readAt reads, at rev, every key the units of a failed Txn compared or
// wrote: values for units that judge them, revisions only for the others.
// It is one read-only Txn (no raft entry), at most as many reads as the
// failed Txn had keys, so within etcd's limit on ops too. With soloLease
// set it also reads the replica registrations, and soloHeld says whether
// the solo fence held at rev (true when there was none).
func (c *groupCommitter) readAt(pending []*commitUnit, rev, soloLease int64) (current map[string]*mvccpb.KeyValue, soloHeld bool, err error) {
	var gets []clientv3.Op
	seen := make(map[string]bool)
	get := func(k string, values bool) {
		if seen[k] {
			return
		}
		seen[k] = true
		if values {
			gets = append(gets, clientv3.OpGet(k, clientv3.WithRev(rev)))
		} else {
			gets = append(gets, clientv3.OpGet(k, clientv3.WithRev(rev), clientv3.WithKeysOnly()))
		}
	}
	for _, u := range pending {
		for _, k := range u.keys {
			get(k, u.readValues)
		}
		for i := range u.fences {
			get(string(u.fences[i].KeyBytes()), false)
		}
		for _, ch := range u.charges {
			get(ch.key, false)
		}
	}
	keyReads := len(gets)
	if soloLease != 0 {
		gets = append(gets, c.solo.read(rev))
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Do, not Txn: the same request, but it is a read, not one of the
	// commits that the Txn counters and test doubles of the KV follow.
	resp, err := c.kv.Do(ctx, clientv3.OpTxn(nil, gets, nil))
	if err != nil {
		return nil, false, err
	}
	responses := resp.Txn().Responses
	soloHeld = true
	if soloLease != 0 && len(responses) > keyReads {
		soloHeld = c.solo.held(responses[keyReads].GetResponseRange().GetKvs(), soloLease)
		responses = responses[:keyReads]
	}
	current = make(map[string]*mvccpb.KeyValue, keyReads)
	for _, r := range responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			current[string(kv.Key)] = kv
		}
	}
	return current, soloHeld, nil
}

// failAll settles every unit of a Txn etcd refused with err.
func (c *groupCommitter) failAll(pending []*commitUnit, err error) {
	result := resultError
	switch {
	case isRequestTooLarge(err):
		err = fmt.Errorf("%w: txn: etcd request too large", ErrInvalidArgument)
	case isNoSpace(err):
		err = fmt.Errorf("%w: txn", ErrNoSpace)
	case isUnavailable(err):
		err = fmt.Errorf("%w: txn: %w", ErrUnavailable, err)
		result = resultUnavailable
	default:
		err = fmt.Errorf("store: txn: %w", err)
	}
	c.metrics.unitsDone(result, len(pending))
	for _, u := range pending {
		u.finish(commitResult{err: err})
	}
}

// settleFailed finishes the units whose compares fail against current, the
// keys read at rev, and returns the others, to be resent. The compares ran
// at rev too, so at least one unit fails; if local evaluation disagrees with
// etcd, everything is failed rather than looping.
func (c *groupCommitter) settleFailed(pending []*commitUnit, current map[string]*mvccpb.KeyValue, rev int64, bounds map[string]allocTip) []*commitUnit {
	var retry []*commitUnit
	failed := 0
	for _, u := range pending {
		holds := true
		for i := range u.cmps {
			if !cmpHolds(&u.cmps[i], current[string(u.cmps[i].KeyBytes())]) {
				holds = false
				break
			}
		}
		for i := 0; holds && i < len(u.fences); i++ {
			holds = cmpHolds(&u.fences[i], current[string(u.fences[i].KeyBytes())])
		}
		for _, ch := range u.charges {
			if holds && ch.view > 0 {
				cmp := ch.compare(bounds[ch.key].bound(ch.view))
				holds = cmpHolds(&cmp, current[ch.key])
			}
		}
		if holds {
			if u.ctx.Err() != nil {
				c.metrics.unitsDone(resultAbandoned, 1)
				u.finish(commitResult{err: u.ctx.Err()})
				continue
			}
			retry = append(retry, u)
			continue
		}
		cur := make([]*mvccpb.KeyValue, len(u.keys))
		for i, k := range u.keys {
			cur[i] = current[k]
		}
		res := commitResult{err: errCompareFailed, rev: rev, current: cur}
		for _, ch := range u.charges {
			if kv := current[ch.key]; kv != nil && kv.ModRevision > bounds[ch.key].bound(ch.view) {
				res.chargedAt = max(res.chargedAt, kv.ModRevision)
			}
		}
		c.metrics.unitsDone(resultCompareFailed, 1)
		u.finish(res)
		failed++
	}
	if failed == 0 && len(retry) > 0 {
		err := fmt.Errorf("store: txn compares failed but none fails locally (revision %d)", rev)
		c.metrics.unitsDone(resultError, len(retry))
		for _, u := range retry {
			u.finish(commitResult{err: err})
		}
		return nil
	}
	return retry
}

// cmpHolds evaluates one compare against the key's value the way etcd does:
// an absent key has zero version and revisions, and never matches a value
// compare.
func cmpHolds(c *clientv3.Cmp, kv *mvccpb.KeyValue) bool {
	pc := c.GetCompare()
	if kv == nil {
		if pc.Target == pb.Compare_VALUE {
			return false
		}
		kv = &mvccpb.KeyValue{}
	}
	var r int
	switch pc.Target {
	case pb.Compare_VERSION:
		r = cmp.Compare(kv.Version, pc.GetVersion())
	case pb.Compare_CREATE:
		r = cmp.Compare(kv.CreateRevision, pc.GetCreateRevision())
	case pb.Compare_MOD:
		r = cmp.Compare(kv.ModRevision, pc.GetModRevision())
	case pb.Compare_VALUE:
		r = bytes.Compare(kv.Value, pc.GetValue())
	case pb.Compare_LEASE:
		r = cmp.Compare(kv.Lease, pc.GetLease())
	default:
		return false
	}
	switch pc.Result {
	case pb.Compare_EQUAL:
		return r == 0
	case pb.Compare_NOT_EQUAL:
		return r != 0
	case pb.Compare_GREATER:
		return r > 0
	case pb.Compare_LESS:
		return r < 0
	}
	return false
}
