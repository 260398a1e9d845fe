package rejectednodes

import (
	"context"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name       string
		rejections map[string]int64
		nodeRev    int64
		want       framework.Code
	}{
		{name: "never rejected", nodeRev: 5, want: framework.Success},
		{name: "rejected by another node", rejections: map[string]int64{"other": 5}, nodeRev: 5, want: framework.Success},
		{name: "rejected by this node, unchanged", rejections: map[string]int64{"n": 5}, nodeRev: 5, want: framework.UnschedulableAndUnresolvable},
		{name: "rejected by this node, updated since", rejections: map[string]int64{"n": 5}, nodeRev: 9, want: framework.Success},
	}
	pl := &RejectedNodes{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fwtest.Node("n", 1000, 1<<30, 10)
			n.Revision = tt.nodeRev
			p := fwtest.Pod("p", nil)
			p.EditExtras().Rejections = tt.rejections
			got := pl.Filter(context.Background(), framework.NewCycleState(), framework.NewPodInfo(p), fwtest.NodeInfo(n))
			if got.Code() != tt.want {
				t.Fatalf("code = %v, want %v", got.Code(), tt.want)
			}
			if tt.want != framework.Success && got.Message() != ErrReasonRejected {
				t.Errorf("message = %q", got.Message())
			}
		})
	}
}

func TestNodeChangeHint(t *testing.T) {
	p := fwtest.Pod("p", nil)
	p.EditExtras().Rejections = map[string]int64{"n": 5}
	tests := []struct {
		name     string
		old, new *framework.Node
		want     framework.QueueingHint
	}{
		{name: "rejecting node updated", old: &framework.Node{Name: "n", Revision: 5}, new: &framework.Node{Name: "n", Revision: 9}, want: framework.Queue},
		{name: "rejecting node re-created", new: &framework.Node{Name: "n", Revision: 12}, want: framework.Queue},
		{name: "rejecting node unchanged", old: &framework.Node{Name: "n", Revision: 5}, new: &framework.Node{Name: "n", Revision: 5}, want: framework.QueueSkip},
		{name: "another node", new: &framework.Node{Name: "m", Revision: 9}, want: framework.QueueSkip},
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
