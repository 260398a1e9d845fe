// Package helper holds scoring arithmetic shared by plugins, with
// kube-scheduler's integer rounding.
package helper

import "github.com/berth-io/berth/scheduler/framework"

// DefaultNormalizeScore scales scores so the largest becomes maxPriority
// (integer division, truncating), and with reverse flips them (maxPriority
// - score). If every score is 0 they stay 0, or all become maxPriority
// with reverse. Kube: pkg/scheduler/framework/plugins/helper/normalize_score.go.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores framework.NodeScoreList) *framework.Status {
	var highest int64
	for i := range scores {
		highest = max(highest, scores[i].Score)
	}
	for i := range scores {
		scores[i].Score = NormalizedScore(maxPriority, reverse, scores[i].Score, highest)
	}
	return nil
}

// NormalizedScore is what DefaultNormalizeScore makes of raw in a list
// whose highest score is highest: one node at a time, for placers that
// keep scores across cycles.
func NormalizedScore(maxPriority int64, reverse bool, raw, highest int64) int64 {
	highest = max(highest, 0)
	if highest == 0 {
		if reverse {
			return maxPriority
		}
		return raw
	}
	s := maxPriority * raw / highest
	if reverse {
		s = maxPriority - s
	}
	return s
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
