package nodename

import (
	"context"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name     string
		podNode  string
		nodeName string
		want     framework.Code
	}{
		{name: "no node asked", nodeName: "a", want: framework.Success},
		{name: "the node asked", podNode: "a", nodeName: "a", want: framework.Success},
		{name: "another node", podNode: "a", nodeName: "b", want: framework.UnschedulableAndUnresolvable},
	}
	pl := &NodeName{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fwtest.Pod("p", nil)
			p.NodeName = tt.podNode
			got := pl.Filter(context.Background(), framework.NewCycleState(), framework.NewPodInfo(p), fwtest.NodeInfo(fwtest.Node(tt.nodeName, 1, 1, 1)))
			if got.Code() != tt.want {
				t.Errorf("code = %v, want %v", got.Code(), tt.want)
			}
			if tt.want != framework.Success && got.Message() != ErrReason {
				t.Errorf("message = %q", got.Message())
			}
		})
	}
}

func TestNodeAddHint(t *testing.T) {
	p := fwtest.Pod("p", nil)
	p.NodeName = "a"
	if h, _ := isSchedulableAfterNodeAdd(p, nil, &framework.Node{Name: "a"}); h != framework.Queue {
		t.Error("the named node arriving should queue")
	}
	if h, _ := isSchedulableAfterNodeAdd(p, nil, &framework.Node{Name: "b"}); h != framework.QueueSkip {
		t.Error("another node arriving should not")
	}
}
