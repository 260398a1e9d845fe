package noderesources

import (
	"math"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/helper"
)

// maxUtilization is 100 percent.
const maxUtilization = 100

// scorer turns per-resource (requested, allocatable) into one node score
// with kube's formulas. A resource with allocatable 0 is left out.
// Kube: pkg/scheduler/framework/plugins/noderesources/least_allocated.go,
// most_allocated.go, requested_to_capacity_ratio.go.
type scorer struct {
	strategy ScoringStrategyType
	weights  []int64
	// shape is the RequestedToCapacityRatio function of utilization.
	shape func(int64) int64
}

func newScorer(s *ScoringStrategy) scorer {
	sc := scorer{strategy: s.Type}
	for _, r := range s.Resources {
		sc.weights = append(sc.weights, r.Weight)
	}
	if s.Type == RequestedToCapacityRatio {
		points := make([]helper.FunctionShapePoint, 0, len(s.RequestedToCapacityRatio.Shape))
		for _, p := range s.RequestedToCapacityRatio.Shape {
			points = append(points, helper.FunctionShapePoint{
				Utilization: int64(p.Utilization),
				// The shape's 0..10 scale becomes the framework's 0..100.
				Score: int64(p.Score) * (framework.MaxNodeScore / maxCustomPriorityScore),
			})
		}
		sc.shape = helper.BuildBrokenLinearFunction(points)
	}
	return sc
}

func (sc *scorer) score(requested, allocatable []int64) int64 {
	var nodeScore, weightSum int64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		w := sc.weights[i]
		switch sc.strategy {
		case MostAllocated:
			nodeScore += mostRequestedScore(requested[i], allocatable[i]) * w
			weightSum += w
		case RequestedToCapacityRatio:
			// Resources scoring 0 do not count towards the average.
			if s := sc.ratioScore(requested[i], allocatable[i]); s > 0 {
				nodeScore += s * w
				weightSum += w
			}
		default:
			nodeScore += leastRequestedScore(requested[i], allocatable[i]) * w
			weightSum += w
		}
	}
	if weightSum == 0 {
		return 0
	}
	if sc.strategy == RequestedToCapacityRatio {
		return int64(math.Round(float64(nodeScore) / float64(weightSum)))
	}
	return nodeScore / weightSum
}

// leastRequestedScore is (capacity-requested)*100/capacity, 0 when full or
// over-committed.
func leastRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return framework.ScaledRatio(capacity-requested, capacity, framework.MaxNodeScore)
}

// mostRequestedScore is requested*100/capacity, capped at 100: requests
// can exceed capacity because empty requests count kube's defaults. The
// products are taken without overflow (framework.ScaledRatio).
func mostRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	return framework.ScaledRatio(requested, capacity, framework.MaxNodeScore)
}

// ratioScore applies the shape to the utilization in whole percent
// (truncated); full or over-committed counts as 100%.
func (sc *scorer) ratioScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return sc.shape(maxUtilization)
	}
	return sc.shape(framework.ScaledRatio(requested, capacity, maxUtilization))
}
