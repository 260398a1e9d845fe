package balancedallocation

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/plugins/helper"
)

const Mi = 1 << 20

var ctx = context.Background()

// Expected scores are computed by hand from kube's balancedResourceScorer
// (pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go):
// fractions req/alloc capped at 1, with plain requests (useRequested, no
// 100m/200Mi defaults); std = |f1-f2|/2 for two, population std for more;
// score = int64((1-std)*100), truncated.
func TestBalancedAllocationScore(t *testing.T) {
	node := func(pods ...*framework.Pod) func() *framework.NodeInfo {
		return func() *framework.NodeInfo {
			n := fwtest.Node("n", 4000, 10000*Mi, 100)
			n.Allocatable[framework.ResourceEphemeralStorage] = 1000
			return fwtest.NodeInfo(n, pods...)
		}
	}
	three := &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: framework.ResourceEphemeralStorage, Weight: 1}}}
	withGPU := &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: "example.com/gpu", Weight: 1}}}
	cpuOnly := &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 1}}}
	tests := []struct {
		name string
		args *Args
		pod  framework.ResourceList
		node func() *framework.NodeInfo
		want int64
	}{
		// .75 and .5: std .125, 87.5 -> 87.
		{name: "two resources, truncated", pod: fwtest.Resources(3000, 5000*Mi), node: node(), want: 87},
		// The pod on the node names no memory: it counts 0 memory here.
		// cpu (1000+3000)/4000 = 1, mem .5: std .25 -> 75.
		{name: "plain requests on the node", pod: fwtest.Resources(3000, 5000*Mi), node: node(fwtest.Pod("o", fwtest.Resources(1000, 0))), want: 75},
		// cpu 5000/4000 capped at 1, mem .5 -> 75.
		{name: "fraction capped at 1", pod: fwtest.Resources(5000, 5000*Mi), node: node(), want: 75},
		// .75 .5 .25: mean .5, std sqrt(.125/3) = .2041 -> 79.58 -> 79.
		{name: "three resources", args: three, pod: framework.ResourceList{"cpu": 3000, "memory": 5000 * Mi, framework.ResourceEphemeralStorage: 250}, node: node(), want: 79},
		// The GPU is not on the node: left out, as the first case.
		{name: "resource absent from node skipped", args: withGPU, pod: framework.ResourceList{"cpu": 3000, "memory": 5000 * Mi, "example.com/gpu": 1}, node: node(), want: 87},
		// One fraction has no spread.
		{name: "single resource", args: cpuOnly, pod: fwtest.Resources(3000, 0), node: node(), want: 100},
		// cpu 0 (no default), mem .5: std .25 -> 75.
		{name: "memory only pod", pod: fwtest.Resources(0, 5000*Mi), node: node(), want: 75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(ctx, tt.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			ba := p.(*BalancedAllocation)
			pi := framework.NewPodInfo(fwtest.Pod("p", tt.pod))
			st := framework.NewCycleState()
			if s := ba.PreScore(ctx, st, pi, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			got, s := ba.Score(ctx, st, pi, tt.node())
			if !s.IsSuccess() || got != tt.want {
				t.Errorf("Score = %d, %v; want %d", got, s, tt.want)
			}
			if got2, _ := ba.Score(ctx, framework.NewCycleState(), pi, tt.node()); got2 != got {
				t.Errorf("Score without PreScore = %d, with = %d", got2, got)
			}
		})
	}
}

func TestBalancedAllocationSkipsBestEffort(t *testing.T) {
	p, _ := New(ctx, nil, nil)
	ba := p.(*BalancedAllocation)
	pi := framework.NewPodInfo(fwtest.Pod("p", nil))
	if s := ba.PreScore(ctx, framework.NewCycleState(), pi, nil); !s.IsSkip() {
		t.Errorf("PreScore = %v, want Skip", s.Code())
	}
	if got, _ := ba.Score(ctx, framework.NewCycleState(), pi, fwtest.NodeInfo(fwtest.Node("n", 1000, Mi, 10))); got != 0 {
		t.Errorf("Score of best-effort pod without PreScore = %d, want 0", got)
	}
}

func TestBalancedAllocationArgs(t *testing.T) {
	for _, tt := range []struct {
		args    any
		wantErr string
	}{
		{args: "x", wantErr: "want args of type *Args"},
		{args: &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 200}}}, wantErr: "not in [1, 100]"},
		{args: Args{Resources: []helper.ResourceSpec{{Name: "cpu"}, {Name: "cpu"}}}, wantErr: "listed twice"},
	} {
		if _, err := New(ctx, tt.args, nil); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("New(%v) error = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}
