// Package helper holds scoring arithmetic shared by plugins, with
// kube-scheduler's integer rounding.
package helper

import "github.com/berth-io/berth/scheduler/framework"

// DefaultNormalizeScore scales scores so the largest becomes maxPriority
// (integer division, truncating), and with reverse flips them (maxPriority
// - score). If every score is 0 they stay 0, or all become maxPriority
// with reverse. Kube: pkg/scheduler/framework/plugins/helper/normalize_score.go.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores framework.NodeScoreList) *framework.Status {
	var maxCount int64
	for i := range scores {
		maxCount = max(maxCount, scores[i].Score)
	}
	if maxCount == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return nil
	}
	for i := range scores {
		s := maxPriority * scores[i].Score / maxCount
		if reverse {
			s = maxPriority - s
		}
		scores[i].Score = s
	}
	return nil
}

// FunctionShapePoint is one corner of a broken linear function.
type FunctionShapePoint struct {
	Utilization int64
	Score       int64
}

// BuildBrokenLinearFunction returns f with f(p) = shape[0].Score for p at
// or below the first point, shape[n-1].Score above the last, and linear
// interpolation (integer division) in between. shape must be sorted by
// Utilization. Kube: pkg/scheduler/framework/plugins/helper/shape_score.go.
func BuildBrokenLinearFunction(shape []FunctionShapePoint) func(int64) int64 {
	return func(p int64) int64 {
		for i := range shape {
			if p <= shape[i].Utilization {
				if i == 0 {
					return shape[0].Score
				}
				prev := shape[i-1]
				return prev.Score + (shape[i].Score-prev.Score)*(p-prev.Utilization)/(shape[i].Utilization-prev.Utilization)
			}
		}
		return shape[len(shape)-1].Score
	}
}
