package noderesources

import (
	"math"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

// Requests whose sums pass the int64 limit once wrapped to negative and
// fit, and scored out of range (issue 12). Saturated, they are
// "Insufficient" everywhere, and every score stays in [0, 100].
func TestSaturatedRequestsNeverFit(t *testing.T) {
	const maxQ = math.MaxInt64
	twoContainers := func(q int64) *framework.Pod {
		p := fwtest.Pod("p", framework.ResourceList{framework.ResourceCPU: q})
		p.Containers = append(p.Containers, framework.Container{Name: "second", Requests: framework.ResourceList{framework.ResourceCPU: q}})
		return p
	}
	withOverhead := fwtest.Pod("p", framework.ResourceList{framework.ResourceMemory: maxQ})
	withOverhead.EditExtras().Overhead = framework.ResourceList{framework.ResourceMemory: 10}
	gpus := fwtest.Pod("p", framework.ResourceList{gpu: maxQ})
	gpus.EditExtras().Overhead = framework.ResourceList{gpu: 1}

	nodes := map[string]func() *framework.NodeInfo{
		"ordinary": func() *framework.NodeInfo { return fwtest.NodeInfo(gpuNode()) },
		"as large as can be": func() *framework.NodeInfo {
			n := fwtest.Node("max", maxQ, maxQ, 110)
			n.Allocatable[gpu] = maxQ
			return fwtest.NodeInfo(n)
		},
		"full": func() *framework.NodeInfo {
			n := fwtest.Node("full", 4000, 10000*Mi, 110)
			return fwtest.NodeInfo(n, fwtest.Pod("hog", fwtest.Resources(4000, 10000*Mi)))
		},
	}
	pods := map[string]*framework.Pod{
		"two max containers":   twoContainers(maxQ),
		"two 2^62 containers":  twoContainers(1 << 62),
		"max plus overhead":    withOverhead,
		"max gpus plus one":    gpus,
		"one saturated itself": fwtest.Pod("p", framework.ResourceList{framework.ResourceCPU: maxQ}),
	}
	strategies := map[string]*FitArgs{
		"least": nil,
		"most":  {ScoringStrategy: &ScoringStrategy{Type: MostAllocated}},
		"ratio": {ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{0, 0}, {100, 10}}}}},
	}
	for podName, pod := range pods {
		pi := framework.NewPodInfo(pod)
		for nodeName, node := range nodes {
			ni := node()
			if got := Fits(pi, ni); len(got) == 0 {
				t.Errorf("pod %q fits node %q; want insufficient", podName, nodeName)
			}
			for sName, args := range strategies {
				f := newFit(t, args)
				st := framework.NewCycleState()
				f.PreScore(ctx, st, pi, nil)
				score, s := f.Score(ctx, st, pi, ni)
				if !s.IsSuccess() || score < 0 || score > framework.MaxNodeScore {
					t.Errorf("%s score of pod %q on node %q = %d, %v; want in [0, %d]", sName, podName, nodeName, score, s, framework.MaxNodeScore)
				}
			}
		}
		// Charged to a node anyway (a foreign binding), it leaves the
		// node's accounting saturated, never negative, and nothing more
		// fits there.
		ni := fwtest.NodeInfo(fwtest.Node("n", maxQ, maxQ, 110))
		ni.AddPodInfo(pi)
		if ni.Requested.MilliCPU < 0 || ni.Requested.Memory < 0 {
			t.Errorf("pod %q: node requested %+v went negative", podName, ni.Requested)
		}
		if pi.Requests.MilliCPU == maxQ {
			if got := Fits(framework.NewPodInfo(fwtest.Pod("next", fwtest.Resources(1, 0))), ni); len(got) == 0 {
				t.Errorf("pod %q: a pod fits next to a saturated one", podName)
			}
		}
	}
}

func TestScoresOfHugeNodesStayInRange(t *testing.T) {
	for _, tt := range []struct{ requested, capacity int64 }{
		{1 << 40, math.MaxInt64}, {math.MaxInt64 - 1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64}, {1, 1 << 62},
	} {
		for name, got := range map[string]int64{
			"least": leastRequestedScore(tt.requested, tt.capacity),
			"most":  mostRequestedScore(tt.requested, tt.capacity),
		} {
			if got < 0 || got > framework.MaxNodeScore {
				t.Errorf("%s(%d, %d) = %d, out of [0, %d]", name, tt.requested, tt.capacity, got, framework.MaxNodeScore)
			}
		}
	}
	// Exact where the plain formula would overflow: 2^62 of 2^63-1 is a
	// hair over half, so 50 used, and 2^62-1 left is a hair under: 49 free.
	if got := mostRequestedScore(1<<62, math.MaxInt64); got != 50 {
		t.Errorf("mostRequestedScore(2^62, max) = %d, want 50", got)
	}
	if got := leastRequestedScore(1<<62, math.MaxInt64); got != 49 {
		t.Errorf("leastRequestedScore(2^62, max) = %d, want 49", got)
	}
}
