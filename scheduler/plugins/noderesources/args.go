package noderesources

import (
	"errors"
	"fmt"
	"strings"

	"github.com/berth-io/berth/scheduler/plugins/helper"
)

// ScoringStrategyType picks how NodeResourcesFit scores nodes.
type ScoringStrategyType string

// Scoring strategies, kube's names.
const (
	// LeastAllocated favours nodes with the most room left (spreading).
	LeastAllocated ScoringStrategyType = "LeastAllocated"
	// MostAllocated favours the fullest nodes (bin packing).
	MostAllocated ScoringStrategyType = "MostAllocated"
	// RequestedToCapacityRatio scores utilization through a user shape.
	RequestedToCapacityRatio ScoringStrategyType = "RequestedToCapacityRatio"
)

// ResourceSpec is a scored resource and its weight (1..100; 0 means 1).
type ResourceSpec = helper.ResourceSpec

// UtilizationShapePoint is one corner of the RequestedToCapacityRatio
// shape: utilization in percent (0..100) and score (0..10).
type UtilizationShapePoint struct {
	Utilization int32
	Score       int32
}

// RequestedToCapacityRatioParam configures RequestedToCapacityRatio.
type RequestedToCapacityRatioParam struct {
	// Shape must be sorted by strictly increasing Utilization.
	Shape []UtilizationShapePoint
}

// ScoringStrategy configures scoring.
type ScoringStrategy struct {
	Type ScoringStrategyType
	// Resources default to cpu and memory, weight 1 each.
	Resources                []ResourceSpec
	RequestedToCapacityRatio *RequestedToCapacityRatioParam
}

// FitArgs configures NodeResourcesFit. The zero value is kube's default.
type FitArgs struct {
	// IgnoredResources are extended resources the filter does not check.
	IgnoredResources []string
	// IgnoredResourceGroups are prefixes (the part before "/") of extended
	// resources the filter does not check.
	IgnoredResourceGroups []string
	// ScoringStrategy defaults to LeastAllocated over cpu and memory.
	ScoringStrategy *ScoringStrategy
}

// maxCustomPriorityScore is the top of the RequestedToCapacityRatio shape
// scale; shape scores are multiplied by MaxNodeScore/10.
const maxCustomPriorityScore = 10

// defaulted returns a copy of args with kube's defaults filled in.
func defaulted(args *FitArgs) FitArgs {
	var out FitArgs
	if args != nil {
		out = *args
	}
	s := ScoringStrategy{Type: LeastAllocated}
	if out.ScoringStrategy != nil {
		s = *out.ScoringStrategy
	}
	if len(s.Resources) == 0 {
		s.Resources = helper.DefaultResources()
	} else {
		s.Resources = append([]ResourceSpec(nil), s.Resources...)
		for i := range s.Resources {
			if s.Resources[i].Weight == 0 {
				s.Resources[i].Weight = 1
			}
		}
	}
	out.ScoringStrategy = &s
	return out
}

// validate checks defaulted args as kube's ValidateNodeResourcesFitArgs.
func validate(args *FitArgs) error {
	var errs []error
	for _, g := range args.IgnoredResourceGroups {
		if strings.Contains(g, "/") {
			errs = append(errs, fmt.Errorf("ignoredResourceGroups: %q: resource group name can't contain '/'", g))
		}
	}
	s := args.ScoringStrategy
	switch s.Type {
	case LeastAllocated, MostAllocated, RequestedToCapacityRatio:
	default:
		errs = append(errs, fmt.Errorf("scoringStrategy.type: unsupported value %q", s.Type))
	}
	seen := map[string]bool{}
	for _, r := range s.Resources {
		if r.Weight < 1 || r.Weight > 100 {
			errs = append(errs, fmt.Errorf("scoringStrategy.resources: weight of %q is %d, not in [1, 100]", r.Name, r.Weight))
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("scoringStrategy.resources: %q listed twice", r.Name))
		}
		seen[r.Name] = true
	}
	if s.Type == RequestedToCapacityRatio {
		if s.RequestedToCapacityRatio == nil || len(s.RequestedToCapacityRatio.Shape) == 0 {
			errs = append(errs, errors.New("scoringStrategy.requestedToCapacityRatio.shape: at least one point is required"))
		} else {
			shape := s.RequestedToCapacityRatio.Shape
			for i, p := range shape {
				if p.Utilization < 0 || p.Utilization > 100 {
					errs = append(errs, fmt.Errorf("shape[%d].utilization: %d not in [0, 100]", i, p.Utilization))
				}
				if p.Score < 0 || p.Score > maxCustomPriorityScore {
					errs = append(errs, fmt.Errorf("shape[%d].score: %d not in [0, %d]", i, p.Score, maxCustomPriorityScore))
				}
				if i > 0 && p.Utilization <= shape[i-1].Utilization {
					errs = append(errs, fmt.Errorf("shape[%d].utilization: values must be sorted in increasing order", i))
				}
			}
		}
	}
	return errors.Join(errs...)
}
