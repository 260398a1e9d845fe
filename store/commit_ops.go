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

// keyBytes lends a key's bytes to a compare or a put.
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

// putTemplate is a put of nothing, for putValue to fill in.
var putTemplate = clientv3.OpPut("", "")

// putValue is clientv3.OpPut of an encoded value, lending the key and the
// value to the Op. val must not change once passed: every caller encodes
// it afresh for the write.
func putValue(key string, val []byte) clientv3.Op {
	var op clientv3.Op
	fillPut(&op, key, val)
	return op
}

// fillPut makes op putValue's put.
func fillPut(op *clientv3.Op, key string, val []byte) {
	*op = putTemplate
	op.WithKeyBytes(keyBytes(key))
	op.WithValueBytes(val)
}

// appendPut is append(ops, putValue(key, val)) with the Op built in its
// place in ops. An Op is 248 bytes; built in the caller's frame and copied
// in, it took several of them there. Every binding cycle runs on a new
// goroutine down to here and then waits in the commit, and with frames
// that large its stack outgrew the size it started with, which the runtime
// then copied: once per pod, 3-5% of the CPU of an end-to-end run.
func appendPut(ops []clientv3.Op, key string, val []byte) []clientv3.Op {
	ops = append(ops, clientv3.Op{})
	fillPut(&ops[len(ops)-1], key, val)
	return ops
}
