package framework

import (
	"fmt"
	"slices"
)

// Matches reports whether labels satisfy every part of s, with Kubernetes'
// semantics: a nil selector matches nothing, an empty one everything;
// NotIn and DoesNotExist match a missing label. A requirement that
// Validate rejects matches nothing (an unknown operator) or follows the
// same rules as a valid one (empty In never matches, empty NotIn always
// does).
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for i := range s.MatchExpressions {
		if !s.MatchExpressions[i].Matches(labels) {
			return false
		}
	}
	return true
}

// Empty reports whether s matches everything: non-nil with no parts.
func (s *LabelSelector) Empty() bool {
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// Matches reports whether labels satisfy one requirement.
func (r *LabelSelectorRequirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case LabelSelectorOpIn:
		return ok && slices.Contains(r.Values, v)
	case LabelSelectorOpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case LabelSelectorOpExists:
		return ok
	case LabelSelectorOpDoesNotExist:
		return !ok
	default:
		return false
	}
}

// Validate returns the error Kubernetes gives when turning s into a
// selector: In and NotIn need values, Exists and DoesNotExist take none,
// and only those four operators exist. Label syntax is not checked.
func (s *LabelSelector) Validate() error {
	if s == nil {
		return nil
	}
	for i := range s.MatchExpressions {
		r := &s.MatchExpressions[i]
		switch r.Operator {
		case LabelSelectorOpIn, LabelSelectorOpNotIn:
			if len(r.Values) == 0 {
				return fmt.Errorf("label selector: key %q: for 'in', 'notin' operators, values set can't be empty", r.Key)
			}
		case LabelSelectorOpExists, LabelSelectorOpDoesNotExist:
			if len(r.Values) != 0 {
				return fmt.Errorf("label selector: key %q: values set must be empty for exists and does not exist", r.Key)
			}
		default:
			return fmt.Errorf("label selector: key %q: %q is not a valid label selector operator", r.Key, r.Operator)
		}
	}
	return nil
}
