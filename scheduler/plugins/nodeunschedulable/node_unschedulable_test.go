package nodeunschedulable

import (
	"context"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name          string
		unschedulable bool
		tols          []framework.Toleration
		want          framework.Code
	}{
		{name: "schedulable node", want: framework.Success},
		{name: "cordoned node", unschedulable: true, want: framework.UnschedulableAndUnresolvable},
		{name: "tolerates the unschedulable taint", unschedulable: true,
			tols: []framework.Toleration{{Key: framework.TaintNodeUnschedulable, Operator: framework.TolerationOpExists, Effect: framework.TaintEffectNoSchedule}}, want: framework.Success},
		{name: "tolerates everything", unschedulable: true, tols: []framework.Toleration{{Operator: framework.TolerationOpExists}}, want: framework.Success},
		{name: "toleration for NoExecute only", unschedulable: true,
			tols: []framework.Toleration{{Key: framework.TaintNodeUnschedulable, Operator: framework.TolerationOpExists, Effect: framework.TaintEffectNoExecute}}, want: framework.UnschedulableAndUnresolvable},
	}
	pl := &NodeUnschedulable{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fwtest.Node("n", 1, 1, 1)
			n.Unschedulable = tt.unschedulable
			p := fwtest.Pod("p", nil)
			p.Tolerations = tt.tols
			got := pl.Filter(context.Background(), framework.NewCycleState(), framework.NewPodInfo(p), fwtest.NodeInfo(n))
			if got.Code() != tt.want {
				t.Errorf("code = %v, want %v", got.Code(), tt.want)
			}
			if tt.want != framework.Success && got.Message() != "node(s) were unschedulable" {
				t.Errorf("message = %q", got.Message())
			}
		})
	}
}

func TestNodeChangeHint(t *testing.T) {
	p := fwtest.Pod("p", nil)
	cordoned := &framework.Node{Name: "n", Unschedulable: true}
	open := &framework.Node{Name: "n"}
	tests := []struct {
		name     string
		old, new *framework.Node
		want     framework.QueueingHint
	}{
		{name: "open node added", new: open, want: framework.Queue},
		{name: "cordoned node added", new: cordoned, want: framework.QueueSkip},
		{name: "uncordoned", old: cordoned, new: open, want: framework.Queue},
		{name: "cordoned now", old: open, new: cordoned, want: framework.QueueSkip},
		{name: "stays open", old: open, new: open, want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old any
			if tt.old != nil {
				old = tt.old
			}
			if got, _ := isSchedulableAfterNodeChange(p, old, tt.new); got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}
