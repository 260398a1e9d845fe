package framework

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const maxQ = math.MaxInt64

func TestAddSubQuantity(t *testing.T) {
	tests := []struct {
		a, b, sum, diff int64
	}{
		{a: 1, b: 2, sum: 3, diff: -1},
		{a: maxQ, b: 1, sum: maxQ, diff: maxQ - 1},
		{a: maxQ, b: maxQ, sum: maxQ, diff: 0},
		{a: 1 << 62, b: 1 << 62, sum: maxQ, diff: 0},
		{a: math.MinInt64, b: -1, sum: math.MinInt64, diff: math.MinInt64 + 1},
		{a: math.MinInt64, b: 1, sum: math.MinInt64 + 1, diff: math.MinInt64},
		{a: 0, b: math.MinInt64, sum: math.MinInt64, diff: maxQ},
		{a: -5, b: maxQ, sum: maxQ - 5, diff: math.MinInt64},
	}
	for _, tt := range tests {
		if got := AddQuantity(tt.a, tt.b); got != tt.sum {
			t.Errorf("AddQuantity(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.sum)
		}
		if got := SubQuantity(tt.a, tt.b); got != tt.diff {
			t.Errorf("SubQuantity(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.diff)
		}
	}
}

func TestExceeds(t *testing.T) {
	tests := []struct {
		name             string
		req, used, alloc int64
		want             bool
	}{
		{name: "fits", req: 10, used: 10, alloc: 20},
		{name: "one over", req: 11, used: 10, alloc: 20, want: true},
		{name: "no request never exceeds", req: 0, used: 30, alloc: 20},
		{name: "negative request is none", req: -5, used: 30, alloc: 20},
		{name: "saturated request on an empty max node", req: maxQ, used: 0, alloc: maxQ, want: true},
		{name: "sum saturates", req: 1 << 62, used: 1 << 62, alloc: maxQ, want: true},
		{name: "saturated node", req: 1, used: maxQ, alloc: maxQ, want: true},
		{name: "huge but exact fits", req: maxQ - 1, used: 0, alloc: maxQ},
		{name: "allocatable near the bottom", req: 1, used: 10, alloc: math.MinInt64 + 5, want: true},
	}
	for _, tt := range tests {
		if got := Exceeds(tt.req, tt.used, tt.alloc); got != tt.want {
			t.Errorf("%s: Exceeds(%d, %d, %d) = %v, want %v", tt.name, tt.req, tt.used, tt.alloc, got, tt.want)
		}
	}
}

func TestScaledRatio(t *testing.T) {
	tests := []struct {
		part, whole, scale, want int64
	}{
		{part: 1, whole: 4, scale: 100, want: 25},
		{part: maxQ, whole: maxQ, scale: 100, want: 100},
		{part: maxQ - 1, whole: maxQ, scale: 100, want: 99},
		{part: 1 << 62, whole: maxQ, scale: 100, want: 50},
		{part: 2 * (1 << 61), whole: 1 << 61, scale: 100, want: 100}, // held to whole
		{part: -1, whole: 10, scale: 100, want: 0},
		{part: 5, whole: 0, scale: 100, want: 0},
		{part: 5, whole: -10, scale: 100, want: 0},
	}
	for _, tt := range tests {
		if got := ScaledRatio(tt.part, tt.whole, tt.scale); got != tt.want {
			t.Errorf("ScaledRatio(%d, %d, %d) = %d, want %d", tt.part, tt.whole, tt.scale, got, tt.want)
		}
	}
}

// The cases issue 12 reported: each summed past int64 and wrapped.
func TestPodRequestsSaturate(t *testing.T) {
	ctr := func(rl ResourceList) Container { return Container{Requests: rl} }
	tests := []struct {
		name string
		pod  Pod
		want Resource
	}{
		{
			name: "two max containers",
			pod:  Pod{Containers: []Container{ctr(ResourceList{ResourceCPU: maxQ}), ctr(ResourceList{ResourceCPU: maxQ})}},
			want: Resource{MilliCPU: maxQ},
		},
		{
			name: "two 2^62 containers",
			pod:  Pod{Containers: []Container{ctr(ResourceList{ResourceCPU: 1 << 62}), ctr(ResourceList{ResourceCPU: 1 << 62})}},
			want: Resource{MilliCPU: maxQ},
		},
		{
			name: "max plus overhead",
			pod:  Pod{Containers: []Container{ctr(ResourceList{ResourceMemory: maxQ})}, Extras: &PodExtras{Overhead: ResourceList{ResourceMemory: 10}}},
			want: Resource{Memory: maxQ},
		},
		{
			name: "init container larger than the saturated sum is held too",
			pod: Pod{
				Containers: []Container{ctr(ResourceList{"example.com/gpu": maxQ}), ctr(ResourceList{"example.com/gpu": 3})},
				Extras: &PodExtras{
					InitContainers: []Container{ctr(ResourceList{"example.com/gpu": maxQ})},
					Overhead:       ResourceList{"example.com/gpu": 1},
				},
			},
			want: Resource{Scalar: map[string]int64{"example.com/gpu": maxQ}},
		},
		{
			name: "negative requests count as none",
			pod: Pod{Containers: []Container{ctr(ResourceList{ResourceCPU: -100, ResourceEphemeralStorage: 5}), ctr(ResourceList{ResourceCPU: 30})},
				Extras: &PodExtras{Overhead: ResourceList{ResourceEphemeralStorage: -7}}},
			want: Resource{MilliCPU: 30, EphemeralStorage: 5},
		},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, PodRequests(&tt.pod, false)); diff != "" {
			t.Errorf("%s: PodRequests (-want,+got):\n%s", tt.name, diff)
		}
	}
}

func TestSaturatedNodeRecountsOnRemove(t *testing.T) {
	huge := NewPodInfo(&Pod{Namespace: "ns", Name: "huge", Priority: 1,
		Containers: []Container{{Requests: ResourceList{ResourceCPU: maxQ, "example.com/gpu": maxQ}}}})
	small := NewPodInfo(&Pod{Namespace: "ns", Name: "small", Priority: 1,
		Containers: []Container{{Requests: ResourceList{ResourceCPU: 200, "example.com/gpu": 1}}}})
	n := NewNodeInfo(small, huge)
	if n.Requested.MilliCPU != maxQ || !n.Requested.Saturated() {
		t.Fatalf("requested cpu = %d, want saturated", n.Requested.MilliCPU)
	}
	if f := n.FreedBelow(2); f.MilliCPU != maxQ || f.Pods != 2 {
		t.Fatalf("FreedBelow = %+v, want saturated cpu over 2 pods", f)
	}
	if err := n.RemovePod(huge.Pod); err != nil {
		t.Fatal(err)
	}
	if got := n.Requested.MilliCPU; got != 200 {
		t.Errorf("requested cpu after removing the saturating pod = %d, want 200", got)
	}
	if got := n.Requested.Scalar["example.com/gpu"]; got != 1 {
		t.Errorf("requested gpu = %d, want 1", got)
	}
	if got, want := n.FreedBelow(2), (Freed{Pods: 1, MilliCPU: 200, Memory: 0}); got != want {
		t.Errorf("FreedBelow after removal = %+v, want %+v", got, want)
	}
	if got := n.NonZeroRequested.MilliCPU; got != 200 {
		t.Errorf("non-zero requested cpu = %d, want 200", got)
	}
}

// randomQuantity is mostly small, sometimes near or at the int64 limit,
// sometimes negative: the values a careless or hostile client sends.
func randomQuantity(r *rand.Rand) int64 {
	switch r.IntN(8) {
	case 0:
		return maxQ - r.Int64N(3)
	case 1:
		return 1<<62 + r.Int64N(1<<20)
	case 2:
		return -r.Int64N(1 << 40)
	case 3:
		return 0
	default:
		return r.Int64N(1 << 20)
	}
}

func randomPod(r *rand.Rand, i int) *PodInfo {
	names := []string{ResourceCPU, ResourceMemory, ResourceEphemeralStorage, "example.com/gpu"}
	list := func() ResourceList {
		rl := ResourceList{}
		for _, n := range names {
			if r.IntN(2) == 0 {
				rl[n] = randomQuantity(r)
			}
		}
		return rl
	}
	p := &Pod{Namespace: "ns", Name: string(rune('a'+i%26)) + string(rune('0'+i/26)), Priority: int32(r.IntN(3))}
	for range 1 + r.IntN(3) {
		p.Containers = append(p.Containers, Container{Requests: list()})
	}
	if r.IntN(3) == 0 {
		p.EditExtras().InitContainers = []Container{{Requests: list()}}
	}
	if r.IntN(3) == 0 {
		p.EditExtras().Overhead = list()
	}
	return NewPodInfo(p)
}

func nonNegative(t *testing.T, what string, r *Resource) {
	t.Helper()
	for name, q := range map[string]int64{ResourceCPU: r.MilliCPU, ResourceMemory: r.Memory,
		ResourceEphemeralStorage: r.EphemeralStorage, ResourcePods: r.AllowedPodNumber} {
		if q < 0 {
			t.Fatalf("%s %s = %d, negative", what, name, q)
		}
	}
	for name, q := range r.Scalar {
		if q < 0 {
			t.Fatalf("%s %s = %d, negative", what, name, q)
		}
	}
}

// sameAmounts compares as amounts: a missing scalar equals a zero one.
func sameAmounts(a, b Resource) bool {
	return cmp.Equal(a.ToList(), b.ToList())
}

// exactFits reports whether the true sum of the non-negative quantities is
// below the limit, summed in uint64, which two int64s cannot overflow.
func exactFits(reqs ...int64) bool {
	var total uint64
	for _, q := range reqs {
		total += uint64(max(q, 0))
		if total >= uint64(maxQ) {
			return false
		}
	}
	return true
}

func TestNodeAccountingProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 2026))
	for round := range 300 {
		n := NewNodeInfo()
		n.SetNode(&Node{Name: "n", Allocatable: ResourceList{ResourceCPU: maxQ, ResourceMemory: maxQ, ResourcePods: 110}})
		var pods []*PodInfo
		for i := range 1 + r.IntN(6) {
			pi := randomPod(r, i)
			nonNegative(t, "pod request", &pi.Requests)

			// A pod whose request saturated fits no node, however large.
			if pi.Requests.MilliCPU == maxQ && !Exceeds(pi.Requests.MilliCPU, 0, maxQ) {
				t.Fatalf("round %d: saturated cpu request fits an empty node of max cpu", round)
			}

			before := n.Clone()
			n.AddPodInfo(pi)
			nonNegative(t, "requested", &n.Requested)
			nonNegative(t, "non-zero requested", &n.NonZeroRequested)
			// The node's sum never wraps: it is at least each part.
			if n.Requested.MilliCPU < pi.Requests.MilliCPU || n.Requested.Memory < pi.Requests.Memory {
				t.Fatalf("round %d: requested %+v below the pod's %+v", round, n.Requested, pi.Requests)
			}
			if r.IntN(4) == 0 {
				// Add then remove gives back exactly the node before,
				// whenever what was there before was not saturated.
				if err := n.RemovePod(pi.Pod); err != nil {
					t.Fatal(err)
				}
				if !before.Requested.Saturated() && !sameAmounts(before.Requested, n.Requested) {
					t.Fatalf("round %d: add+remove: requested %+v, was %+v", round, n.Requested, before.Requested)
				}
				if !before.NonZeroRequested.Saturated() && !sameAmounts(before.NonZeroRequested, n.NonZeroRequested) {
					t.Fatalf("round %d: add+remove: non-zero requested %+v, was %+v", round, n.NonZeroRequested, before.NonZeroRequested)
				}
				if before.FreedBelow(3) != n.FreedBelow(3) {
					t.Fatalf("round %d: add+remove: freed %+v, was %+v", round, n.FreedBelow(3), before.FreedBelow(3))
				}
				continue
			}
			pods = append(pods, pi)
		}
		// Removing every pod in any order returns the node to empty, and
		// each step leaves the exact sum of the pods still there whenever
		// that sum is representable.
		r.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		for i, pi := range pods {
			if err := n.RemovePod(pi.Pod); err != nil {
				t.Fatal(err)
			}
			nonNegative(t, "requested", &n.Requested)
			var cpus []int64
			for _, left := range pods[i+1:] {
				cpus = append(cpus, left.Requests.MilliCPU)
			}
			if exactFits(cpus...) {
				var want int64
				for _, q := range cpus {
					want += q
				}
				if n.Requested.MilliCPU != want {
					t.Fatalf("round %d: requested cpu %d, want the exact sum %d", round, n.Requested.MilliCPU, want)
				}
			} else if n.Requested.MilliCPU != maxQ {
				t.Fatalf("round %d: requested cpu %d, want saturated", round, n.Requested.MilliCPU)
			}
		}
		if !sameAmounts(n.Requested, Resource{}) || !sameAmounts(n.NonZeroRequested, Resource{}) || n.FreedBelow(math.MaxInt32) != (Freed{}) {
			t.Fatalf("round %d: empty node has requested %+v, non-zero %+v, freed %+v", round, n.Requested, n.NonZeroRequested, n.FreedBelow(math.MaxInt32))
		}
	}
}
