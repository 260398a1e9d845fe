package noderesources

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

const Mi = 1 << 20

var ctx = context.Background()

const gpu = "example.com/gpu"

func newFit(t *testing.T, args any) *Fit {
	t.Helper()
	p, err := New(ctx, args, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p.(*Fit)
}

// podWith builds a pod: one container with rl, plus optional init
// containers and overhead.
func podWith(rl framework.ResourceList) *framework.Pod { return fwtest.Pod("p", rl) }

func TestFitFilter(t *testing.T) {
	// Node: 4000m cpu, 10000Mi memory, 32 pods, 1000 ephemeral, 2 GPUs;
	// one pod on it uses 2000m, 4000Mi and 1 GPU.
	node := func() *framework.NodeInfo {
		n := fwtest.Node("n", 4000, 10000*Mi, 32)
		n.Allocatable[framework.ResourceEphemeralStorage] = 1000
		n.Allocatable[gpu] = 2
		return fwtest.NodeInfo(n, fwtest.Pod("used", framework.ResourceList{framework.ResourceCPU: 2000, framework.ResourceMemory: 4000 * Mi, gpu: 1}))
	}
	full := func() *framework.NodeInfo { // one pod slot, taken; cpu over-committed
		return fwtest.NodeInfo(fwtest.Node("full", 4000, 10000*Mi, 1), fwtest.Pod("hog", fwtest.Resources(5000, 0)))
	}
	tests := []struct {
		name string
		args *FitArgs
		pod  *framework.Pod
		node func() *framework.NodeInfo
		want []string // nil: fits
		// unresolvable: some request exceeds the node's whole allocatable,
		// so the code must be UnschedulableAndUnresolvable (kube v1.35+).
		unresolvable bool
	}{
		{name: "fits exactly", pod: podWith(fwtest.Resources(2000, 6000*Mi)), node: node},
		{name: "one millicore too many", pod: podWith(fwtest.Resources(2001, 0)), node: node, want: []string{"Insufficient cpu"}},
		{name: "cpu and memory, in kube's order", pod: podWith(fwtest.Resources(2001, 6000*Mi+1)), node: node, want: []string{"Insufficient cpu", "Insufficient memory"}},
		{name: "empty pod still needs a pod slot", pod: podWith(nil), node: full, want: []string{"Too many pods"}},
		{name: "too many pods listed first", pod: podWith(fwtest.Resources(1, 0)), node: full, want: []string{"Too many pods", "Insufficient cpu"}},
		{name: "empty pod ignores over-committed resources", pod: podWith(nil), node: func() *framework.NodeInfo {
			return fwtest.NodeInfo(fwtest.Node("oc", 4000, 10000*Mi, 10), fwtest.Pod("hog", fwtest.Resources(5000, 0)))
		}},
		{name: "a resource not requested is not checked", pod: podWith(framework.ResourceList{framework.ResourceCPU: 0, framework.ResourceMemory: Mi}), node: func() *framework.NodeInfo {
			return fwtest.NodeInfo(fwtest.Node("oc", 4000, 10000*Mi, 10), fwtest.Pod("hog", fwtest.Resources(5000, 0)))
		}},
		{name: "ephemeral storage", pod: podWith(framework.ResourceList{framework.ResourceEphemeralStorage: 1001}), node: node, want: []string{"Insufficient ephemeral-storage"}, unresolvable: true},
		{name: "extended resource fits", pod: podWith(framework.ResourceList{gpu: 1}), node: node},
		{name: "extended resource short", pod: podWith(framework.ResourceList{gpu: 2}), node: node, want: []string{"Insufficient example.com/gpu"}},
		{name: "extended resource absent from node", pod: podWith(framework.ResourceList{"example.com/fpga": 1}), node: node, want: []string{"Insufficient example.com/fpga"}, unresolvable: true},
		{name: "extended resources in name order", pod: podWith(framework.ResourceList{"b.io/x": 1, "a.io/y": 1}), node: node, want: []string{"Insufficient a.io/y", "Insufficient b.io/x"}, unresolvable: true},
		{name: "zero extended request skipped", pod: podWith(framework.ResourceList{"example.com/fpga": 0}), node: node},
		{name: "ignored resource", args: &FitArgs{IgnoredResources: []string{gpu}}, pod: podWith(framework.ResourceList{gpu: 5}), node: node},
		{name: "ignored group", args: &FitArgs{IgnoredResourceGroups: []string{"example.com"}}, pod: podWith(framework.ResourceList{gpu: 5}), node: node},
		{name: "other group not ignored", args: &FitArgs{IgnoredResourceGroups: []string{"other.io"}}, pod: podWith(framework.ResourceList{gpu: 5}), node: node, want: []string{"Insufficient example.com/gpu"}, unresolvable: true},
		{name: "largest init container counts", pod: func() *framework.Pod {
			p := podWith(fwtest.Resources(1000, 0))
			p.EditExtras().InitContainers = []framework.Container{{Name: "init", Requests: fwtest.Resources(2001, 0)}}
			return p
		}(), node: node, want: []string{"Insufficient cpu"}},
		{name: "overhead counts", pod: func() *framework.Pod {
			p := podWith(fwtest.Resources(1500, 0))
			p.EditExtras().Overhead = fwtest.Resources(501, 0)
			return p
		}(), node: node, want: []string{"Insufficient cpu"}},
		{name: "cpu beyond the node's total", pod: podWith(fwtest.Resources(4001, 0)), node: node, want: []string{"Insufficient cpu"}, unresolvable: true},
		{name: "memory beyond the total next to resolvable cpu", pod: podWith(fwtest.Resources(2001, 10000*Mi+1)), node: node,
			want: []string{"Insufficient cpu", "Insufficient memory"}, unresolvable: true},
		{name: "extended beyond the total", pod: podWith(framework.ResourceList{gpu: 3}), node: node, want: []string{"Insufficient example.com/gpu"}, unresolvable: true},
		{name: "pod slots are always resolvable", pod: podWith(nil), node: func() *framework.NodeInfo {
			return fwtest.NodeInfo(fwtest.Node("nopods", 4000, 10000*Mi, 0))
		}, want: []string{"Too many pods"}},
		{name: "init container beyond the total", pod: func() *framework.Pod {
			p := podWith(fwtest.Resources(1000, 0))
			p.EditExtras().InitContainers = []framework.Container{{Name: "init", Requests: fwtest.Resources(4001, 0)}}
			return p
		}(), node: node, want: []string{"Insufficient cpu"}, unresolvable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFit(t, tt.args)
			pi := framework.NewPodInfo(tt.pod)
			st := framework.NewCycleState()
			if _, s := f.PreFilter(ctx, st, pi, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			got := f.Filter(ctx, st, pi, tt.node())
			if tt.want == nil {
				if !got.IsSuccess() {
					t.Fatalf("Filter = %v, want success", got)
				}
				return
			}
			wantCode := framework.Unschedulable
			if tt.unresolvable {
				wantCode = framework.UnschedulableAndUnresolvable
			}
			if got.Code() != wantCode {
				t.Errorf("code = %v, want %v", got.Code(), wantCode)
			}
			if diff := cmp.Diff(tt.want, got.Reasons()); diff != "" {
				t.Errorf("reasons (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFitFilterWithoutPreFilter(t *testing.T) {
	f := newFit(t, nil)
	got := f.Filter(ctx, framework.NewCycleState(), framework.NewPodInfo(podWith(nil)), fwtest.NodeInfo(fwtest.Node("n", 1, 1, 1)))
	if got.Code() != framework.Error || !strings.Contains(got.Message(), `reading "PreFilterNodeResourcesFit"`) {
		t.Errorf("Filter = %v %q", got.Code(), got.Message())
	}
}

func TestFits(t *testing.T) {
	ni := fwtest.NodeInfo(fwtest.Node("n", 1000, 1000, 10))
	got := Fits(framework.NewPodInfo(podWith(fwtest.Resources(1500, 0))), ni)
	want := []InsufficientResource{{ResourceName: framework.ResourceCPU, Reason: "Insufficient cpu", Requested: 1500, Used: 0, Capacity: 1000, Unresolvable: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

// Expected scores are computed by hand from kube's formulas in
// pkg/scheduler/framework/plugins/noderesources/least_allocated.go
// ((cap-req)*100/cap per resource, weighted integer average),
// most_allocated.go (req*100/cap, req capped at cap) and
// requested_to_capacity_ratio.go (shape scaled x10, utilization
// req*100/cap truncated, zero scores left out, math.Round of the
// average), with requests from resource_allocation.go: cpu and memory use
// the node's NonZeroRequested plus the pod's request with 100m/200Mi for
// containers that name none.
func TestFitScore(t *testing.T) {
	empty := func() *framework.NodeInfo { return fwtest.NodeInfo(gpuNode()) }
	// A pod naming only cpu 1000m: on the node it counts 1000m and 200Mi.
	busy := func() *framework.NodeInfo {
		return fwtest.NodeInfo(gpuNode(), fwtest.Pod("cpu-only", fwtest.Resources(1000, 0)))
	}
	least := func(res ...ResourceSpec) *FitArgs {
		return &FitArgs{ScoringStrategy: &ScoringStrategy{Type: LeastAllocated, Resources: res}}
	}
	most := &FitArgs{ScoringStrategy: &ScoringStrategy{Type: MostAllocated}}
	ratio := func(shape []UtilizationShapePoint, res ...ResourceSpec) *FitArgs {
		return &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio, Resources: res,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: shape}}}
	}
	up := []UtilizationShapePoint{{0, 0}, {100, 10}}
	down := []UtilizationShapePoint{{0, 10}, {100, 0}}
	steep := []UtilizationShapePoint{{0, 0}, {30, 10}}
	typical := podWith(fwtest.Resources(3000, 5000*Mi))
	tests := []struct {
		name string
		args *FitArgs
		pod  *framework.Pod
		node func() *framework.NodeInfo
		want int64
	}{
		// cpu (4000-3000)*100/4000 = 25, mem 5000*100/10000 = 50, (25+50)/2 = 37.5 -> 37.
		{name: "least: truncating average", pod: typical, node: empty, want: 37},
		// cpu 3900*100/4000 = 97.5 -> 97, mem 9800*100/10000 = 98, 195/2 -> 97.
		{name: "least: empty pod counts defaults", pod: podWith(nil), node: empty, want: 97},
		// cpu 1000+1000 -> 50, mem 200+1000 Mi -> 88, 138/2 = 69.
		{name: "least: node's non-zero requests", pod: podWith(fwtest.Resources(1000, 1000*Mi)), node: busy, want: 69},
		// cpu over capacity -> 0, mem 50 -> 25.
		{name: "least: over capacity scores 0", pod: podWith(fwtest.Resources(5000, 5000*Mi)), node: empty, want: 25},
		// (25*3 + 50*1) / 4 = 31.25 -> 31.
		{name: "least: weights", args: least(ResourceSpec{Name: "cpu", Weight: 3}, ResourceSpec{Name: "memory", Weight: 1}), pod: typical, node: empty, want: 31},
		// The pod asks no GPU: that resource and its weight are left out.
		{name: "least: unrequested extended resource skipped", args: least(ResourceSpec{Name: "cpu", Weight: 1}, ResourceSpec{Name: "memory", Weight: 1}, ResourceSpec{Name: gpu, Weight: 5}),
			pod: typical, node: empty, want: 37},
		// gpu (4-1)*100/4 = 75: (25 + 50 + 75*5) / 7 = 64.3 -> 64.
		{name: "least: requested extended resource", args: least(ResourceSpec{Name: "cpu", Weight: 1}, ResourceSpec{Name: "memory", Weight: 1}, ResourceSpec{Name: gpu, Weight: 5}),
			pod: podWith(framework.ResourceList{"cpu": 3000, "memory": 5000 * Mi, gpu: 1}), node: empty, want: 64},
		// The node has no ephemeral storage: nothing to score.
		{name: "least: nothing allocatable scores 0", args: least(ResourceSpec{Name: framework.ResourceEphemeralStorage, Weight: 1}), pod: typical, node: empty, want: 0},
		// cpu 75, mem 50: 125/2 = 62.5 -> 62.
		{name: "most: truncating average", args: most, pod: typical, node: empty, want: 62},
		// cpu 100*100/4000 = 2.5 -> 2, mem 200*100/10000 = 2.
		{name: "most: empty pod counts defaults", args: most, pod: podWith(nil), node: empty, want: 2},
		// cpu capped at 100, mem 50.
		{name: "most: over capacity capped", args: most, pod: podWith(fwtest.Resources(5000, 5000*Mi)), node: empty, want: 75},
		// f(75) = 75, f(50) = 50: round(62.5) = 63 where MostAllocated gives 62.
		{name: "ratio: rounds half up", args: ratio(up), pod: typical, node: empty, want: 63},
		// f = 100 - util: 25 and 50, round(37.5) = 38 where LeastAllocated gives 37.
		{name: "ratio: decreasing shape", args: ratio(down), pod: typical, node: empty, want: 38},
		// cpu explicitly 0 (no default), f(0) = 0 is left out: 50/1.
		{name: "ratio: zero scores left out", args: ratio(up), pod: podWith(framework.ResourceList{"cpu": 0, "memory": 5000 * Mi}), node: empty, want: 50},
		// util 20: 100*20/30 = 66.7 -> 66; mem util 50 is past the last point: 100. round(83) = 83.
		{name: "ratio: interpolation truncates", args: ratio(steep), pod: podWith(fwtest.Resources(800, 5000*Mi)), node: empty, want: 83},
		// Over capacity counts as 100%: f(100) = 100, mem 50: 75.
		{name: "ratio: over capacity", args: ratio(up), pod: podWith(fwtest.Resources(5000, 5000*Mi)), node: empty, want: 75},
		// (75*2 + 50) / 3 = 66.7 -> 67.
		{name: "ratio: weights", args: ratio(up, ResourceSpec{Name: "cpu", Weight: 2}, ResourceSpec{Name: "memory", Weight: 1}), pod: typical, node: empty, want: 67},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFit(t, tt.args)
			pi := framework.NewPodInfo(tt.pod)
			st := framework.NewCycleState()
			if s := f.PreScore(ctx, st, pi, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			got, s := f.Score(ctx, st, pi, tt.node())
			if !s.IsSuccess() || got != tt.want {
				t.Errorf("Score = %d, %v; want %d", got, s, tt.want)
			}
			// Without PreScore the plugin computes the same on its own.
			got2, _ := f.Score(ctx, framework.NewCycleState(), pi, tt.node())
			if got2 != got {
				t.Errorf("Score without PreScore = %d, with = %d", got2, got)
			}
		})
	}
}

// gpuNode is 4000m cpu, 10000Mi memory, 100 pods and 4 GPUs.
func gpuNode() *framework.Node {
	n := fwtest.Node("n", 4000, 10000*Mi, 100)
	n.Allocatable[gpu] = 4
	return n
}

func TestFitScoreManyResources(t *testing.T) {
	// More resources than fit the inline buffer still score: ten extended
	// resources at half use each give (100-50) = 50.
	var res []ResourceSpec
	node := fwtest.Node("n", 0, 0, 10)
	rl := framework.ResourceList{}
	for i := range 10 {
		name := "example.com/r" + string(rune('a'+i))
		res = append(res, ResourceSpec{Name: name, Weight: 1})
		node.Allocatable[name] = 4
		rl[name] = 2
	}
	f := newFit(t, &FitArgs{ScoringStrategy: &ScoringStrategy{Type: LeastAllocated, Resources: res}})
	pi := framework.NewPodInfo(podWith(rl))
	if got, _ := f.Score(ctx, framework.NewCycleState(), pi, fwtest.NodeInfo(node)); got != 50 {
		t.Errorf("Score = %d, want 50", got)
	}
}

func TestFitArgsValidation(t *testing.T) {
	tests := []struct {
		name    string
		args    any
		wantErr string
	}{
		{name: "wrong type", args: 42, wantErr: "want args of type *FitArgs"},
		{name: "group with slash", args: &FitArgs{IgnoredResourceGroups: []string{"a/b"}}, wantErr: "can't contain '/'"},
		{name: "unknown strategy", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: "Nope"}}, wantErr: `unsupported value "Nope"`},
		{name: "weight too big", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: LeastAllocated, Resources: []ResourceSpec{{Name: "cpu", Weight: 101}}}}, wantErr: "not in [1, 100]"},
		{name: "duplicate resource", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: LeastAllocated, Resources: []ResourceSpec{{Name: "cpu"}, {Name: "cpu"}}}}, wantErr: "listed twice"},
		{name: "ratio without shape", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio}}, wantErr: "at least one point"},
		{name: "shape unsorted", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{50, 1}, {50, 2}}}}}, wantErr: "increasing order"},
		{name: "shape score too big", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{0, 11}}}}}, wantErr: "score: 11 not in [0, 10]"},
		{name: "shape utilization too big", args: &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{101, 1}}}}}, wantErr: "utilization: 101 not in [0, 100]"},
		{name: "value args are fine", args: FitArgs{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(ctx, tt.args, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFitQueueingHints(t *testing.T) {
	pod := podWith(fwtest.Resources(2000, 0))
	small := fwtest.Node("n", 1000, 10*Mi, 10)
	big := fwtest.Node("n", 4000, 10*Mi, 10)
	moreMem := fwtest.Node("n", 1000, 20*Mi, 10)
	bigMoreMem := fwtest.Node("n", 4000, 20*Mi, 10)
	morePods := fwtest.Node("n", 4000, 10*Mi, 20)
	tests := []struct {
		name     string
		old, new any
		want     framework.QueueingHint
	}{
		{name: "added node that fits", new: big, want: framework.Queue},
		{name: "added node too small", new: small, want: framework.QueueSkip},
		{name: "grew in cpu, now fits", old: small, new: big, want: framework.Queue},
		{name: "grew only in memory, still too small", old: small, new: moreMem, want: framework.QueueSkip},
		{name: "grew in an unrequested resource", old: big, new: bigMoreMem, want: framework.QueueSkip},
		{name: "more pod slots", old: big, new: morePods, want: framework.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := isSchedulableAfterNodeChange(pod, tt.old, tt.new)
			if err != nil || got != tt.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	assigned := podWith(nil)
	assigned.NodeName = "n"
	if h, _ := isSchedulableAfterPodDelete(pod, assigned, nil); h != framework.Queue {
		t.Error("deleting an assigned pod should queue")
	}
	if h, _ := isSchedulableAfterPodDelete(pod, podWith(nil), nil); h != framework.QueueSkip {
		t.Error("deleting an unassigned pod frees nothing")
	}
}
