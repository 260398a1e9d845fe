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

// Expected scores are worked out by hand from kube v1.37's
// balancedResourceScorer (pkg/scheduler/framework/plugins/noderesources/
// balanced_allocation.go): fractions req/alloc capped at 1, with plain
// requests (no 100m/200Mi defaults); balance = int64((1-std)*100) with
// std = |f1-f2|/2 for two fractions, the population std for more; the
// score is 50 + (50 + with - without)/2 in integer arithmetic, where with
// and without are the balance with the pod placed and without it. The
// last cases rebuild the situations of kube's own v1.37 test table.
func TestBalancedAllocationScore(t *testing.T) {
	node := func(pods ...*framework.Pod) func() *framework.NodeInfo {
		return func() *framework.NodeInfo {
			n := fwtest.Node("n", 4000, 10000*Mi, 100)
			n.Allocatable[framework.ResourceEphemeralStorage] = 1000
			return fwtest.NodeInfo(n, pods...)
		}
	}
	sized := func(cpu, mem int64, extra framework.ResourceList, pods ...*framework.Pod) func() *framework.NodeInfo {
		return func() *framework.NodeInfo {
			n := fwtest.Node("n", cpu, mem, 100)
			for k, v := range extra {
				n.Allocatable[k] = v
			}
			return fwtest.NodeInfo(n, pods...)
		}
	}
	three := &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: framework.ResourceEphemeralStorage, Weight: 1}}}
	withGPU := &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: "example.com/gpu", Weight: 1}}}
	cpuOnly := &Args{Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 1}}}
	gpus := framework.ResourceList{"example.com/gpu": 8}
	tests := []struct {
		name string
		args *Args
		pod  framework.ResourceList
		node func() *framework.NodeInfo
		want int64
	}{
		// With: .75 and .5, std .125 -> 87. Without: 0 and 0 -> 100.
		// 50 + (50+87-100)/2 = 50 + 18.
		{name: "two resources, truncated", pod: fwtest.Resources(3000, 5000*Mi), node: node(), want: 68},
		// The pod on the node names no memory: it counts 0 memory here.
		// With: cpu 1, mem .5 -> 75. Without: .25, 0 -> 87. 50 + 38/2.
		{name: "plain requests on the node", pod: fwtest.Resources(3000, 5000*Mi), node: node(fwtest.Pod("o", fwtest.Resources(1000, 0))), want: 69},
		// With: cpu 5000/4000 capped at 1, mem .5 -> 75; without 100.
		{name: "fraction capped at 1", pod: fwtest.Resources(5000, 5000*Mi), node: node(), want: 62},
		// With: .75 .5 .25, mean .5, std sqrt(.125/3) = .2041 -> 79;
		// without 100. 50 + 29/2.
		{name: "three resources", args: three, pod: framework.ResourceList{"cpu": 3000, "memory": 5000 * Mi, framework.ResourceEphemeralStorage: 250}, node: node(), want: 64},
		// The GPU is not on the node: left out, as the first case.
		{name: "resource absent from node skipped", args: withGPU, pod: framework.ResourceList{"cpu": 3000, "memory": 5000 * Mi, "example.com/gpu": 1}, node: node(), want: 68},
		// One fraction has no spread either way: unchanged balance is 75.
		{name: "single resource", args: cpuOnly, pod: fwtest.Resources(3000, 0), node: node(), want: 75},
		// With: cpu 0 (no default), mem .5 -> 75; without 100.
		{name: "memory only pod", pod: fwtest.Resources(0, 5000*Mi), node: node(), want: 62},
		// Both fractions go 0 -> .5: balance stays 100.
		{name: "evenly sized node keeps its balance", pod: fwtest.Resources(3000, 5000*Mi), node: sized(6000, 10000*Mi, nil), want: 75},
		// With: .6 and .25 -> 82; without: .3 and 0 -> 85. 50 + 47/2.
		{name: "loaded node", pod: fwtest.Resources(3000, 5000*Mi),
			node: sized(10000, 20000*Mi, nil, fwtest.Pod("o", fwtest.Resources(3000, 0))), want: 73},
		// With: .6 and .2 -> 80; without: .3 and .1 -> 90. 50 + 40/2.
		{name: "loaded larger node", pod: fwtest.Resources(3000, 5000*Mi),
			node: sized(10000, 50000*Mi, nil, fwtest.Pod("o", fwtest.Resources(3000, 5000*Mi))), want: 70},
		// The pod fills the only unused resource: 50 -> 100, the maximum.
		{name: "pod evens a lopsided node", pod: fwtest.Resources(0, 5000*Mi),
			node: sized(3000, 5000*Mi, nil, fwtest.Pod("o", fwtest.Resources(3000, 0))), want: 100},
		// The pod unbalances an empty node completely: 100 -> 50, the minimum.
		{name: "pod unbalances an empty node", pod: fwtest.Resources(0, 5000*Mi), node: sized(10000, 5000*Mi, nil), want: 50},
		// With: 1 and 0 -> 50; without: .5 and 0 -> 75. 50 + 25/2.
		{name: "pod fills cpu on a node with no memory use", pod: fwtest.Resources(3000, 0),
			node: sized(6000, 10000*Mi, nil, fwtest.Pod("o", fwtest.Resources(3000, 0))), want: 62},
		// Three fractions: cpu .857, mem .125 and gpu .375 -> .5 make
		// balance 69 -> 70: 50 + 51/2.
		{name: "requested extended resource counts", args: withGPU, pod: framework.ResourceList{"example.com/gpu": 1},
			node: sized(3500, 40000*Mi, gpus, fwtest.Pod("o", framework.ResourceList{"cpu": 3000, "memory": 5000 * Mi, "example.com/gpu": 3})), want: 75},
		// Gpu 0 -> .125 next to the same cpu and memory: 62 -> 65.
		{name: "requested extended resource from zero", args: withGPU, pod: framework.ResourceList{"example.com/gpu": 1},
			node: sized(3500, 40000*Mi, gpus, fwtest.Pod("o", fwtest.Resources(3000, 5000*Mi))), want: 76},
		// The pod asks no GPU, so the node's GPUs are left out: cpu .857
		// and mem .125 -> 63 against 100 empty.
		{name: "extended resource not requested is left out", args: withGPU, pod: fwtest.Resources(3000, 5000*Mi),
			node: sized(3500, 40000*Mi, gpus), want: 56},
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
