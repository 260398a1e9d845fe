package store

import (
	"context"
	"testing"
	"unsafe"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// The hand-built compares must be exactly what clientv3.Compare builds.
func TestCompareBuildersMatchClientv3(t *testing.T) {
	for _, rev := range []int64{0, 1, 42, 1 << 40} {
		for _, tc := range []struct {
			name      string
			got, want clientv3.Cmp
		}{
			{"createRevIs", createRevIs("/k", rev), clientv3.Compare(clientv3.CreateRevision("/k"), "=", rev)},
			{"modRevIs", modRevIs("/k", rev), clientv3.Compare(clientv3.ModRevision("/k"), "=", rev)},
			{"modRevBelow", modRevBelow("/k", rev), clientv3.Compare(clientv3.ModRevision("/k"), "<", rev)},
		} {
			if !proto.Equal(tc.got.GetCompare(), tc.want.GetCompare()) {
				t.Errorf("%s(%d) = %v, want %v", tc.name, rev, tc.got.GetCompare(), tc.want.GetCompare())
			}
		}
	}
}

// The compare builders make the compare and its target, nothing more:
// no copy of the key or of the compare.
func TestCompareBuildersDoNotCopy(t *testing.T) {
	key := "/berth/v1/pods/shop/web"
	for name, build := range map[string]func() clientv3.Cmp{
		"createRevIs": func() clientv3.Cmp { return createRevIs(key, 7) },
		"modRevIs":    func() clientv3.Cmp { return modRevIs(key, 7) },
	} {
		var c clientv3.Cmp
		if allocs := testing.AllocsPerRun(20, func() { c = build() }); allocs > 2 {
			t.Errorf("%s allocated %v times, want the compare and its target only", name, allocs)
		}
		if &c.KeyBytes()[0] != unsafe.StringData(key) {
			t.Errorf("%s copied the key", name)
		}
	}
}

// txnRecorder is an etcd KV service that keeps the Txn requests it is
// sent and answers each as succeeded.
type txnRecorder struct {
	pb.KVClient
	got []*pb.TxnRequest
}

func (r *txnRecorder) Txn(_ context.Context, req *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	r.got = append(r.got, req)
	return &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: 1}, Succeeded: true}, nil
}

// A group commit sent to the KV service directly is the request clientv3
// would have made of the same writes, and so is one sent through clientv3
// from the ops converted back (clientOp).
func TestDirectTxnIsWhatClientv3Sends(t *testing.T) {
	ctx := testCtx(t)
	cmps := []clientv3.Cmp{createRevIs("/p/a", 0), modRevIs("/p/b", 7), modRevBelow("/alloc/n", 9)}
	ops := []*pb.RequestOp{putOp("/p/a", []byte("pod a")), leasedPutOp("/lease/n", []byte("42"), 42),
		deleteOp("/p/b"), putString("/alloc/n", "me")}
	want := &txnRecorder{}
	if _, err := clientv3.NewKVFromKVClient(want, nil).Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision("/p/a"), "=", 0),
		clientv3.Compare(clientv3.ModRevision("/p/b"), "=", 7),
		clientv3.Compare(clientv3.ModRevision("/alloc/n"), "<", 9),
	).Then(
		clientv3.OpPut("/p/a", "pod a"), clientv3.OpPut("/lease/n", "42", clientv3.WithLease(42)),
		clientv3.OpDelete("/p/b"), clientv3.OpPut("/alloc/n", "me"),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"direct", "clientv3"} {
		rec := &txnRecorder{}
		c := &groupCommitter{kv: clientv3.NewKVFromKVClient(rec, nil)}
		if path == "direct" {
			c.kv, c.direct = nil, rec
		}
		resp, err := c.send(ctx, cmps, ops)
		if err != nil || !resp.Succeeded {
			t.Fatalf("%s: send = %v, %v", path, resp, err)
		}
		if len(rec.got) != 1 || !proto.Equal(rec.got[0], want.got[0]) {
			t.Errorf("%s: sent %v\nwant %v", path, rec.got, want.got[0])
		}
	}
}

// A put lends its key and value to the request and is one allocation.
func TestPutOpLendsKeyAndValue(t *testing.T) {
	key, val := "/k", []byte("encoded pod")
	put := putOp(key, val).GetRequestPut()
	if &put.Value[0] != &val[0] || &put.Key[0] != unsafe.StringData(key) {
		t.Fatal("putOp copied the key or the value")
	}
	if allocs := testing.AllocsPerRun(10, func() { putOp(key, val) }); allocs != 1 {
		t.Fatalf("putOp allocated %v times, want 1", allocs)
	}
}

// eventKey reads a watched key in place.
func TestEventKeyDoesNotCopy(t *testing.T) {
	ev := &clientv3.Event{Kv: &mvccpb.KeyValue{Key: []byte("/berth/v1/pods/shop/web")}}
	got := eventKey(ev)
	if got != "/berth/v1/pods/shop/web" {
		t.Fatalf("eventKey = %q", got)
	}
	if unsafe.StringData(got) != &ev.Kv.Key[0] {
		t.Fatal("eventKey copied the key")
	}
}
