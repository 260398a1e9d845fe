package store

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cmpIdentity tells equal compares apart from different ones.
type cmpIdentity struct {
	key            string
	target         pb.Compare_CompareTarget
	result         pb.Compare_CompareResult
	rangeEnd       string
	value          string
	version        int64
	createRevision int64
	modRevision    int64
	lease          int64
}

func identify(c *clientv3.Cmp) cmpIdentity {
	pc := c.GetCompare()
	return cmpIdentity{
		key: string(pc.Key), target: pc.Target, result: pc.Result, rangeEnd: string(pc.RangeEnd),
		value: string(pc.GetValue()), version: pc.GetVersion(), createRevision: pc.GetCreateRevision(),
		modRevision: pc.GetModRevision(), lease: pc.GetLease(),
	}
}

// The compares of the per-pod paths are built here rather than with
// clientv3.Compare, which deep-copies its argument through protobuf
// reflection; the Cmp constructors give a fresh *pb.Compare to fill in.

// createRevIs compares key's create revision to rev (0: the key is absent).
func createRevIs(key string, rev int64) clientv3.Cmp {
	c := clientv3.CreateRevision(key)
	pc := c.GetCompare()
	pc.Result = pb.Compare_EQUAL
	pc.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: rev}
	return c
}

// modRevIs compares key's mod revision to rev.
func modRevIs(key string, rev int64) clientv3.Cmp {
	return modRevCmp(key, pb.Compare_EQUAL, rev)
}

// modRevBelow holds if key's mod revision is less than rev.
func modRevBelow(key string, rev int64) clientv3.Cmp {
	return modRevCmp(key, pb.Compare_LESS, rev)
}

func modRevCmp(key string, result pb.Compare_CompareResult, rev int64) clientv3.Cmp {
	c := clientv3.ModRevision(key)
	pc := c.GetCompare()
	pc.Result = result
	pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: rev}
	return c
}

// putValue is clientv3.OpPut of an encoded value, without OpPut's copy of
// it: a pod's value is most of the bytes a write of it allocates on
// Berth's side. val must not change once passed (every caller encodes it
// afresh for the write).
func putValue(key string, val []byte) clientv3.Op {
	op := clientv3.OpPut(key, "")
	op.WithValueBytes(val)
	return op
}
