package store

import (
	"unsafe"

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

// The compares and puts of the per-pod paths are built here rather than
// with clientv3's constructors: clientv3.Compare and FromCompare deep-copy
// their argument through protobuf reflection, OpPut leaves its result on
// the heap, and each copies the key (and OpPut the value) into bytes of
// its own. Here the key's bytes are lent instead: clientv3 deep-copies a
// Txn's compares when they are added to it, and a put's key and value are
// only read, into the request and from it, never written.

// keyBytes lends a string's bytes (a key, or a value already a string) to
// a compare or a put.
func keyBytes(key string) []byte { return unsafe.Slice(unsafe.StringData(key), len(key)) }

// createRevIs compares key's create revision to rev (0: the key is absent).
func createRevIs(key string, rev int64) clientv3.Cmp {
	// The constructors are the only way to a Cmp that does not copy; the
	// empty key they are given costs nothing and is replaced at once.
	c := clientv3.CreateRevision("")
	pc := c.GetCompare()
	pc.Key, pc.Result = keyBytes(key), pb.Compare_EQUAL
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
	c := clientv3.ModRevision("")
	pc := c.GetCompare()
	pc.Key, pc.Result = keyBytes(key), result
	pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: rev}
	return c
}

// A unit's writes are etcd's own request ops, built once here: a group
// commit hands them to the in-process etcd as they are (Config.KVClient),
// where clientv3 would have converted an Op of 248 bytes into this form
// for every write and deep-copied every compare through reflection on the
// way: 3-9% of the CPU of storing a pod (BenchmarkCreatePodsBatched).
// Only a client without that service converts them back (clientOp).

// putBox holds a put's request and the two wrappers etcd's Txn wants
// around it, so that a put is one allocation instead of three.
type putBox struct {
	op   pb.RequestOp
	put  pb.RequestOp_RequestPut
	body pb.PutRequest
}

// putOp writes val under key, lending both to the request: val must not
// change once passed, as every caller encodes it afresh for the write.
func putOp(key string, val []byte) *pb.RequestOp {
	return leasedPutOp(key, val, clientv3.NoLease)
}

// leasedPutOp is putOp attached to lease.
func leasedPutOp(key string, val []byte, lease clientv3.LeaseID) *pb.RequestOp {
	b := &putBox{}
	b.body.Key, b.body.Value, b.body.Lease = keyBytes(key), val, int64(lease)
	b.put.RequestPut = &b.body
	b.op.Request = &b.put
	return &b.op
}

// putString is putOp of a string value.
func putString(key, val string) *pb.RequestOp { return putOp(key, keyBytes(val)) }

// deleteOp deletes key.
func deleteOp(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: keyBytes(key)}}}
}

// opKey is the key op writes; a unit's ops are puts and deletes of one
// key each.
func opKey(op *pb.RequestOp) []byte {
	if put := op.GetRequestPut(); put != nil {
		return put.Key
	}
	return op.GetRequestDeleteRange().GetKey()
}

// clientOp is op as clientv3 builds it, for a client without the KV
// service; it lends the key and value as op does.
func clientOp(op *pb.RequestOp) clientv3.Op {
	if put := op.GetRequestPut(); put != nil {
		// Lease 0 is clientv3.NoLease: a put without one.
		o := clientv3.OpPut("", "", clientv3.WithLease(clientv3.LeaseID(put.Lease)))
		o.WithKeyBytes(put.Key)
		o.WithValueBytes(put.Value)
		return o
	}
	del := op.GetRequestDeleteRange()
	o := clientv3.OpDelete("")
	o.WithKeyBytes(del.Key)
	if len(del.RangeEnd) > 0 {
		o.WithRangeBytes(del.RangeEnd)
	}
	return o
}
