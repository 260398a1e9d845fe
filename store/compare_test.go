package store

import (
	"testing"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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

// putValue must write what clientv3.OpPut writes, lending its key and
// value rather than copying them.
func TestPutValueLendsTheValue(t *testing.T) {
	val := []byte("encoded pod")
	op := putValue("/k", val)
	want := clientv3.OpPut("/k", string(val))
	if !op.IsPut() || string(op.KeyBytes()) != string(want.KeyBytes()) || string(op.ValueBytes()) != string(want.ValueBytes()) {
		t.Fatalf("putValue = put %q=%q, want put %q=%q", op.KeyBytes(), op.ValueBytes(), want.KeyBytes(), want.ValueBytes())
	}
	if &op.ValueBytes()[0] != &val[0] {
		t.Fatal("putValue copied the value")
	}
	if allocs := testing.AllocsPerRun(10, func() { op = putValue("/k", val) }); allocs != 0 {
		t.Fatalf("putValue allocated %v times", allocs)
	}
}

// appendPut appends what putValue builds, after the ops already there,
// and leaves the template it starts from as it was.
func TestAppendPutMatchesPutValue(t *testing.T) {
	val := []byte("encoded pod")
	first := putValue("/a", []byte("x"))
	ops := appendPut([]clientv3.Op{first}, "/k", val)
	if len(ops) != 2 || string(ops[0].KeyBytes()) != "/a" {
		t.Fatalf("appendPut lost the ops before it: %d ops", len(ops))
	}
	got, want := ops[1], putValue("/k", val)
	if !got.IsPut() || string(got.KeyBytes()) != string(want.KeyBytes()) || string(got.ValueBytes()) != string(want.ValueBytes()) {
		t.Fatalf("appendPut = put %q=%q, want put %q=%q", got.KeyBytes(), got.ValueBytes(), want.KeyBytes(), want.ValueBytes())
	}
	if &got.ValueBytes()[0] != &val[0] {
		t.Fatal("appendPut copied the value")
	}
	if len(putTemplate.KeyBytes()) != 0 || len(putTemplate.ValueBytes()) != 0 {
		t.Fatal("appendPut changed the template")
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
