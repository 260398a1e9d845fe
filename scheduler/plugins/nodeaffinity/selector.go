package nodeaffinity

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-io/berth/scheduler/framework"
)

// nodeNameField is the only field a term's MatchFields may name.
const nodeNameField = "metadata.name"

// labelRequirement is one parsed MatchExpressions entry.
type labelRequirement struct {
	key    string
	op     framework.NodeSelectorOperator
	values []string
	// bound is the parsed value of Gt and Lt.
	bound int64
}

func (r *labelRequirement) matches(labels map[string]string) bool {
	v, ok := labels[r.key]
	switch r.op {
	case framework.NodeSelectorOpIn:
		return ok && slices.Contains(r.values, v)
	case framework.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(r.values, v)
	case framework.NodeSelectorOpExists:
		return ok
	case framework.NodeSelectorOpDoesNotExist:
		return !ok
	case framework.NodeSelectorOpGt, framework.NodeSelectorOpLt:
		if !ok {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		if r.op == framework.NodeSelectorOpGt {
			return n > r.bound
		}
		return n < r.bound
	default:
		return false
	}
}

// fieldRequirement is one parsed MatchFields entry: the node name equals
// (In) or differs from (NotIn) value.
type fieldRequirement struct {
	value string
	notIn bool
}

// term is a parsed NodeSelectorTerm. A term that failed to parse keeps its
// error and matches no node, as in Kubernetes, where such a term is only
// reported when no other term matches.
type term struct {
	labels []labelRequirement
	fields []fieldRequirement
	err    error
}

func isEmptyTerm(t *framework.NodeSelectorTerm) bool {
	return len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0
}

func parseTerm(t *framework.NodeSelectorTerm, path string) term {
	var out term
	var errs []error
	if len(t.MatchExpressions) > 0 {
		out.labels = make([]labelRequirement, 0, len(t.MatchExpressions))
	}
	for i := range t.MatchExpressions {
		r, err := parseLabelRequirement(&t.MatchExpressions[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.matchExpressions[%d]: %w", path, i, err))
			continue
		}
		out.labels = append(out.labels, r)
	}
	for i := range t.MatchFields {
		r, err := parseFieldRequirement(&t.MatchFields[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.matchFields[%d]: %w", path, i, err))
			continue
		}
		out.fields = append(out.fields, r)
	}
	if len(errs) > 0 {
		out = term{err: errors.Join(errs...)}
	}
	return out
}

// parseLabelRequirement checks a requirement the way Kubernetes' label
// selector does: a qualified key, valid label values, a value count that
// fits the operator, and an integer for Gt and Lt.
func parseLabelRequirement(r *framework.NodeSelectorRequirement) (labelRequirement, error) {
	var errs []error
	if err := validateLabelKey(r.Key); err != nil {
		errs = append(errs, err)
	}
	out := labelRequirement{key: r.Key, op: r.Operator, values: r.Values}
	switch r.Operator {
	case framework.NodeSelectorOpIn, framework.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			errs = append(errs, fmt.Errorf("values: must not be empty for operator %s", r.Operator))
		}
	case framework.NodeSelectorOpExists, framework.NodeSelectorOpDoesNotExist:
		if len(r.Values) != 0 {
			errs = append(errs, fmt.Errorf("values: must be empty for operator %s", r.Operator))
		}
	case framework.NodeSelectorOpGt, framework.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			errs = append(errs, fmt.Errorf("values: exactly one value is required for operator %s", r.Operator))
		}
		for i, v := range r.Values {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("values[%d]: %q is not an integer", i, v))
			}
			out.bound = n
		}
	default:
		errs = append(errs, fmt.Errorf("operator: unsupported value %q", r.Operator))
	}
	for i, v := range r.Values {
		if err := validateLabelValue(v); err != nil {
			errs = append(errs, fmt.Errorf("values[%d]: %w", i, err))
		}
	}
	return out, errors.Join(errs...)
}

func parseFieldRequirement(r *framework.NodeSelectorRequirement) (fieldRequirement, error) {
	if r.Key != nodeNameField {
		return fieldRequirement{}, fmt.Errorf("key: unsupported field %q, only %q", r.Key, nodeNameField)
	}
	var notIn bool
	switch r.Operator {
	case framework.NodeSelectorOpIn:
	case framework.NodeSelectorOpNotIn:
		notIn = true
	default:
		return fieldRequirement{}, fmt.Errorf("operator: unsupported value %q for a field, only In and NotIn", r.Operator)
	}
	if len(r.Values) != 1 {
		return fieldRequirement{}, fmt.Errorf("values: must have exactly one element, got %d", len(r.Values))
	}
	return fieldRequirement{value: r.Values[0], notIn: notIn}, nil
}

// match reports whether every requirement of the term holds on node. The
// fields are ignored for a node without a name, as in Kubernetes.
func (t *term) match(node *framework.Node) (bool, error) {
	if t.err != nil {
		return false, t.err
	}
	for i := range t.labels {
		if !t.labels[i].matches(node.Labels) {
			return false, nil
		}
	}
	if node.Name != "" {
		for _, f := range t.fields {
			if (node.Name == f.value) == f.notIn {
				return false, nil
			}
		}
	}
	return true, nil
}

// nodeSelector is a parsed NodeSelector: its non-empty terms, ORed.
type nodeSelector struct {
	terms []term
}

// parseNodeSelector parses every term; errors stay with their terms.
func parseNodeSelector(ns *framework.NodeSelector, path string) *nodeSelector {
	s := &nodeSelector{terms: make([]term, 0, len(ns.NodeSelectorTerms))}
	for i := range ns.NodeSelectorTerms {
		t := &ns.NodeSelectorTerms[i]
		// A term with no requirements selects nothing.
		if isEmptyTerm(t) {
			continue
		}
		s.terms = append(s.terms, parseTerm(t, fmt.Sprintf("%s.nodeSelectorTerms[%d]", path, i)))
	}
	return s
}

// err joins the parse errors of every term.
func (s *nodeSelector) err() error {
	var errs []error
	for i := range s.terms {
		if s.terms[i].err != nil {
			errs = append(errs, s.terms[i].err)
		}
	}
	return errors.Join(errs...)
}

// match reports whether any term matches node. Parse errors are returned
// only when no term matched; a selector with no terms matches nothing.
func (s *nodeSelector) match(node *framework.Node) (bool, error) {
	if node == nil {
		return false, nil
	}
	var errs []error
	for i := range s.terms {
		ok, err := s.terms[i].match(node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return true, nil
		}
	}
	return false, errors.Join(errs...)
}

// preferredTerm is a parsed PreferredSchedulingTerm.
type preferredTerm struct {
	term
	weight int64
}

// parsePreferredTerms parses weighted terms, skipping those with weight 0
// or no requirements; any parse error fails the whole list.
func parsePreferredTerms(terms []framework.PreferredSchedulingTerm, path string) ([]preferredTerm, error) {
	out := make([]preferredTerm, 0, len(terms))
	var errs []error
	for i := range terms {
		t := &terms[i]
		if t.Weight == 0 || isEmptyTerm(&t.Preference) {
			continue
		}
		p := preferredTerm{term: parseTerm(&t.Preference, fmt.Sprintf("%s[%d].preference", path, i)), weight: int64(t.Weight)}
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		out = append(out, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// scorePreferred sums the weights of the terms that match node.
func scorePreferred(terms []preferredTerm, node *framework.Node) int64 {
	var score int64
	for i := range terms {
		if ok, _ := terms[i].match(node); ok {
			score += terms[i].weight
		}
	}
	return score
}

// labelPair is one entry of a pod's NodeSelector.
type labelPair struct{ key, value string }

// RequiredNodeAffinity is a pod's hard node constraints, parsed once: its
// NodeSelector and its required node affinity, both of which a node must
// satisfy. Kube: component-helpers/scheduling/corev1/nodeaffinity.
type RequiredNodeAffinity struct {
	selector []labelPair
	affinity *nodeSelector
}

// GetRequiredNodeAffinity parses the pod's NodeSelector and
// Affinity.NodeAffinity.Required. Terms that fail to parse match no node.
func GetRequiredNodeAffinity(pod *framework.Pod) RequiredNodeAffinity {
	var r RequiredNodeAffinity
	if len(pod.NodeSelector) > 0 {
		r.selector = make([]labelPair, 0, len(pod.NodeSelector))
		for k, v := range pod.NodeSelector {
			r.selector = append(r.selector, labelPair{k, v})
		}
	}
	if req := requiredOf(pod); req != nil {
		r.affinity = parseNodeSelector(req, "spec.affinity.nodeAffinity.required")
	}
	return r
}

// Match reports whether node satisfies both constraints. A nil required
// affinity matches every node; a required affinity with no usable term
// matches none. The error, if any, is the parse error of the affinity
// terms, returned only when none matched.
func (r RequiredNodeAffinity) Match(node *framework.Node) (bool, error) {
	for _, p := range r.selector {
		if v, ok := node.Labels[p.key]; !ok || v != p.value {
			return false, nil
		}
	}
	if r.affinity != nil {
		return r.affinity.match(node)
	}
	return true, nil
}

func requiredOf(pod *framework.Pod) *framework.NodeSelector {
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.Required
	}
	return nil
}

func preferredOf(pod *framework.Pod) []framework.PreferredSchedulingTerm {
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.Preferred
	}
	return nil
}

// Label syntax, as Kubernetes validates selector keys and values.
const (
	maxLabelNameLen  = 63
	maxDNSSubdomLen  = 253
	maxLabelValueLen = 63
)

// validateLabelKey checks a qualified name: an optional DNS subdomain
// prefix and "/", then a name of at most 63 alphanumerics, '-', '_' and
// '.', starting and ending alphanumeric.
func validateLabelKey(key string) error {
	name := key
	if prefix, rest, ok := strings.Cut(key, "/"); ok {
		if strings.Contains(rest, "/") {
			return fmt.Errorf("key: %q has more than one '/'", key)
		}
		if prefix == "" {
			return fmt.Errorf("key: %q has an empty prefix", key)
		}
		if len(prefix) > maxDNSSubdomLen || !framework.IsDNSSubdomain(prefix) {
			return fmt.Errorf("key: prefix of %q is not a DNS-1123 subdomain", key)
		}
		name = rest
	}
	if name == "" || len(name) > maxLabelNameLen || !framework.IsLabelName(name) {
		return fmt.Errorf("key: name part of %q must be 1-%d alphanumerics, '-', '_' or '.', starting and ending alphanumeric", key, maxLabelNameLen)
	}
	return nil
}

// validateLabelValue checks a label value: empty, or at most 63 characters
// of the same alphabet as a name.
func validateLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxLabelValueLen || !framework.IsLabelName(v) {
		return fmt.Errorf("%q is not a valid label value: at most %d alphanumerics, '-', '_' or '.', starting and ending alphanumeric", v, maxLabelValueLen)
	}
	return nil
}
