package schedulinggates

import (
	"context"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

var ctx = context.Background()

func gated(name string, gates ...string) *framework.Pod {
	p := fwtest.Pod(name, nil)
	p.EditExtras().SchedulingGates = gates
	return p
}

func TestPreEnqueue(t *testing.T) {
	tests := []struct {
		name    string
		gates   []string
		wantMsg string // "": admitted
	}{
		{name: "no gates"},
		{name: "empty list", gates: []string{}},
		{name: "one gate", gates: []string{"example.com/quota"}, wantMsg: "waiting for scheduling gates: [example.com/quota]"},
		{name: "gates in order", gates: []string{"a", "b"}, wantMsg: "waiting for scheduling gates: [a b]"},
	}
	pl := &SchedulingGates{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pl.PreEnqueue(ctx, gated("p", tt.gates...))
			if tt.wantMsg == "" {
				if got != nil {
					t.Errorf("PreEnqueue = %v, want nil", got)
				}
				return
			}
			if got.Code() != framework.UnschedulableAndUnresolvable || got.Message() != tt.wantMsg {
				t.Errorf("PreEnqueue = %v %q, want UnschedulableAndUnresolvable %q", got.Code(), got.Message(), tt.wantMsg)
			}
		})
	}
}

func TestGatesUpdateHint(t *testing.T) {
	pod := gated("p", "a")
	otherUID := gated("p")
	otherUID.UID = "uid-other"
	tests := []struct {
		name    string
		updated any
		want    framework.QueueingHint
	}{
		{name: "all gates removed", updated: gated("p"), want: framework.Queue},
		{name: "a gate left", updated: gated("p", "b"), want: framework.QueueSkip},
		{name: "another pod", updated: gated("q"), want: framework.QueueSkip},
		{name: "a recreated pod", updated: otherUID, want: framework.QueueSkip},
		{name: "not a pod", updated: "x", want: framework.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := isSchedulableAfterGatesUpdate(pod, pod, tt.updated); got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEventsToRegister(t *testing.T) {
	evs, err := (&SchedulingGates{}).EventsToRegister(ctx)
	if err != nil || len(evs) != 1 || evs[0].QueueingHintFn == nil {
		t.Fatalf("EventsToRegister = %+v, %v", evs, err)
	}
	ev := evs[0].Event
	if ev.Resource != framework.EventResourcePod || ev.ActionType != framework.ActionUpdatePodSchedulingGates {
		t.Errorf("event = %+v", ev)
	}
}
