package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// TestFaultCheckerFindsViolations feeds the history checker a history
// with one of each violation it looks for, written straight into etcd, so
// a passing suite means the checks ran, not that they cannot fail.
func TestFaultCheckerFindsViolations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	put := func(ops ...clientv3.Op) int64 {
		t.Helper()
		resp, err := c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	enc := func(m proto.Message) string {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	node := func(name string, cpu int64) clientv3.Op {
		return clientv3.OpPut("/berth/v1/nodes/"+name, enc(&berthv1.Node{Name: name, Allocatable: map[string]int64{"cpu": cpu, "pods": 10}}))
	}
	pod := func(name, uid, group, nodeName string) clientv3.Op {
		p := &berthv1.Pod{Namespace: "ns", Name: name, Uid: uid, PodGroup: group, NodeName: nodeName,
			Containers: []*berthv1.Container{{Name: "c", Requests: map[string]int64{"cpu": 100}}},
			Status:     &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING}}
		if nodeName != "" {
			p.Status.Phase = berthv1.PodPhase_POD_PHASE_BOUND
		}
		return clientv3.OpPut("/berth/v1/pods/ns/"+name, enc(p))
	}

	from := put(node("n1", 200), node("n2", 1000))
	put(pod("a", "ua", "", ""), pod("b", "ub", "", ""), pod("c", "uc", "", ""))
	revA := put(pod("a", "ua", "", "n1"))
	revB := put(pod("b", "ub", "", "n1"))
	revC := put(pod("c", "uc", "", "n1")) // 300m on a 200m node
	put(clientv3.OpDelete("/berth/v1/pods/ns/c"))
	put(pod("a", "ua", "", "")) // back to pending...
	revA2 := put(pod("a", "ua", "", "n2"))
	revG1 := put(pod("g1", "ug1", "g", "n2")) // 1 of min 2
	revG2 := put(pod("g2", "ug2", "g", "n2"))
	end := "/berth/v1/~end"
	put(clientv3.OpPut(end, ""))

	h, err := scanHistory(ctx, c, "/berth", end, map[string]int32{"ns/g": 2})
	if err != nil {
		t.Fatal(err)
	}
	checkAlive(h, map[string]string{"ns/b": "ub", "ns/gone": "ux", "ns/g1": "ug1"})
	bound := func(uid, node string, rev int64) *berthv1.BindingEvent {
		return &berthv1.BindingEvent{Type: berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, Namespace: "ns", Uid: uid, NodeName: node, Revision: rev}
	}
	// revA missing, revB twice, revA2 out of order, one unknown.
	seen := checkWatch(h, []*berthv1.BindingEvent{
		bound("ub", "n1", revB), bound("ub", "n1", revB), bound("uc", "n1", revC),
		bound("ug1", "n2", revG1), bound("ua", "n2", revA2), bound("ug2", "n2", revG2), bound("uz", "n1", revG2),
	}, from)
	_ = revA

	want := map[string]int{
		vOvercommit: 1, vTwoNodes: 1, vGangPartial: 1, vLostPod: 1,
		vWatchMissed: 1, vWatchDup: 1, vWatchOrder: 1, vWatchUnknown: 1,
	}
	if diff := cmp.Diff(want, h.v.count); diff != "" {
		t.Errorf("violations (-want,+got):\n%s\n%s", diff, h.v)
	}
	if seen != 7 || len(h.bindings) != 6 || h.byReplica[""] != 6 {
		t.Errorf("seen %d BOUND, %d bindings; want 7 and 6", seen, len(h.bindings))
	}
}
