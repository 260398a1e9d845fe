package store

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func heldEvent(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// Held changes come out once per key, the last, in the order of the last
// changes; the holder is then empty, and it is full at maxHeldPods keys or
// at twice as many changes.
func TestHeldPodsKeepTheLastChangeOfEachKey(t *testing.T) {
	var none *heldPods
	if none.len() != 0 {
		t.Fatal("a nil holder holds something")
	}
	p := newHeldPods()
	for i, key := range []string{"a", "b", "a", "c", "b", "a"} {
		p.add(heldEvent(key, int64(i+1)))
	}
	if p.len() != 3 || p.full() {
		t.Fatalf("len %d, full %v; want 3 keys, not full", p.len(), p.full())
	}
	var got []string
	p.flush(func(ev *clientv3.Event) { got = append(got, fmt.Sprintf("%s@%d", ev.Kv.Key, ev.Kv.ModRevision)) })
	if want := "[c@4 b@5 a@6]"; fmt.Sprint(got) != want {
		t.Errorf("flushed %v; want %s", got, want)
	}
	if p.len() != 0 || len(p.evs) != 0 {
		t.Errorf("after flush: %d keys, %d changes held", p.len(), len(p.evs))
	}

	for i := range maxHeldPods {
		p.add(heldEvent(fmt.Sprint(i), int64(i)))
	}
	if !p.full() {
		t.Errorf("%d keys: not full", maxHeldPods)
	}
	p.flush(func(*clientv3.Event) {})
	for i := range 2 * maxHeldPods {
		p.add(heldEvent(fmt.Sprint(i%2), int64(i)))
	}
	if p.len() != 2 || !p.full() {
		t.Errorf("%d changes of 2 keys: len %d, full %v; want 2 and full", 2*maxHeldPods, p.len(), p.full())
	}
}
