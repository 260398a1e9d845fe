package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestBindingEventsTransitions(t *testing.T) {
	pod := func(node string, phase berthv1.PodPhase, preemptedBy string) *berthv1.Pod {
		return &berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u1", NodeName: node,
			Status: &berthv1.PodStatus{Phase: phase, PreemptedBy: preemptedBy}}
	}
	const (
		pending = berthv1.PodPhase_POD_PHASE_PENDING
		bound   = berthv1.PodPhase_POD_PHASE_BOUND
		running = berthv1.PodPhase_POD_PHASE_RUNNING
		done    = berthv1.PodPhase_POD_PHASE_SUCCEEDED
	)
	ev := func(typ berthv1.BindingEventType, node, preemptor string) *berthv1.BindingEvent {
		return &berthv1.BindingEvent{Type: typ, Namespace: "ns", Name: "p", Uid: "u1", NodeName: node, Revision: 7, Preemptor: preemptor}
	}
	BOUND, UNBOUND, EVICT := berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND, berthv1.BindingEventType_BINDING_EVENT_TYPE_EVICT
	tests := []struct {
		name      string
		prev, cur *berthv1.Pod
		want      []*berthv1.BindingEvent
	}{
		{"created pending", nil, pod("", pending, ""), nil},
		{"declared bound at create", nil, pod("n1", bound, ""), []*berthv1.BindingEvent{ev(BOUND, "n1", "")}},
		{"scheduled", pod("", pending, ""), pod("n1", bound, ""), []*berthv1.BindingEvent{ev(BOUND, "n1", "")}},
		{"confirmed running", pod("n1", bound, ""), pod("n1", running, ""), nil},
		{"finished", pod("n1", running, ""), pod("n1", done, ""), []*berthv1.BindingEvent{ev(UNBOUND, "n1", "")}},
		{"deleted", pod("n1", bound, ""), nil, []*berthv1.BindingEvent{ev(UNBOUND, "n1", "")}},
		{"moved", pod("n1", bound, ""), pod("n2", bound, ""), []*berthv1.BindingEvent{ev(UNBOUND, "n1", ""), ev(BOUND, "n2", "")}},
		{"chosen as victim", pod("n1", running, ""), pod("n1", running, "ns/big"), []*berthv1.BindingEvent{ev(EVICT, "n1", "ns/big")}},
		{"victim mark unchanged", pod("n1", running, "ns/big"), pod("n1", running, "ns/big"), nil},
		{"victim deleted", pod("n1", running, "ns/big"), nil, []*berthv1.BindingEvent{ev(UNBOUND, "n1", "")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []*berthv1.BindingEvent
			if err := bindingEvents(tc.prev, tc.cur, 7, func(e *berthv1.BindingEvent) error { got = append(got, e); return nil }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}
