package helper

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

func TestDefaultNormalizeScore(t *testing.T) {
	tests := []struct {
		name    string
		in      []int64
		reverse bool
		want    []int64
	}{
		{name: "scale to max, truncating", in: []int64{3, 2, 0}, want: []int64{100, 66, 0}},
		{name: "reverse", in: []int64{3, 2, 0}, reverse: true, want: []int64{0, 34, 100}},
		{name: "all zero", in: []int64{0, 0}, want: []int64{0, 0}},
		{name: "all zero reversed", in: []int64{0, 0}, reverse: true, want: []int64{100, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := make(framework.NodeScoreList, len(tt.in))
			for i, v := range tt.in {
				s[i].Score = v
			}
			DefaultNormalizeScore(framework.MaxNodeScore, tt.reverse, s)
			var got []int64
			for _, x := range s {
				got = append(got, x.Score)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBuildBrokenLinearFunction(t *testing.T) {
	f := BuildBrokenLinearFunction([]FunctionShapePoint{{10, 1}, {90, 9}, {100, 100}})
	tests := []struct{ p, want int64 }{
		{0, 1},     // before the first point
		{10, 1},    // on it
		{50, 5},    // 1 + 8*40/80
		{11, 1},    // 1 + 8*1/80 = 1.1 -> 1
		{89, 8},    // 1 + 8*79/80 = 8.9 -> 8
		{95, 54},   // 9 + 91*5/10 = 54.5 -> 54
		{100, 100}, // last point
		{200, 100}, // past it
	}
	for _, tt := range tests {
		if got := f(tt.p); got != tt.want {
			t.Errorf("f(%d) = %d, want %d", tt.p, got, tt.want)
		}
	}
}

func TestAllocatableRequested(t *testing.T) {
	node := &framework.Node{Name: "n", Allocatable: framework.ResourceList{
		"cpu": 4000, "memory": 1000, framework.ResourceEphemeralStorage: 500, framework.ResourcePods: 10, "example.com/gpu": 4}}
	ni := framework.NewNodeInfo(framework.NewPodInfo(&framework.Pod{Name: "o", Containers: []framework.Container{{
		Requests: framework.ResourceList{framework.ResourceEphemeralStorage: 100, "example.com/gpu": 1}}}}))
	ni.SetNode(node)
	tests := []struct {
		resource     string
		podReq       int64
		useRequested bool
		alloc, req   int64
	}{
		{"cpu", 10, false, 4000, 110},         // non-zero default of the pod on the node
		{"cpu", 10, true, 4000, 10},           // plain
		{"memory", 0, false, 1000, 200 << 20}, // 200Mi default exceeds the node
		{framework.ResourceEphemeralStorage, 50, false, 500, 150},
		{"example.com/gpu", 1, false, 4, 2},
		{"example.com/gpu", 0, false, 0, 0},      // not requested: skipped
		{"example.com/fpga", 1, false, 0, 0},     // not on the node: skipped
		{framework.ResourcePods, 1, false, 0, 0}, // never scored
	}
	for _, tt := range tests {
		a, r := AllocatableRequested(ni, tt.resource, tt.podReq, tt.useRequested)
		if a != tt.alloc || r != tt.req {
			t.Errorf("%s (useRequested %v) = %d, %d; want %d, %d", tt.resource, tt.useRequested, a, r, tt.alloc, tt.req)
		}
	}
}
