package server

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/server/limits"
	"github.com/berth-io/berth/store"
)

// Limits on request shapes. They keep one request from monopolising a
// group-committed etcd Txn or the server's memory.
const (
	maxSubmitBatch   = 1000
	maxPageSize      = 5000
	defaultPageSize  = 500
	maxContainers    = 64
	maxLabels        = 64
	maxTaints        = 64
	maxImages        = 256
	maxLabelValueLen = 63
	maxUIDLen        = 128
	maxSchedulerName = 253
)

// violations collects every problem of a request so the caller can fix them
// all at once.
type violations struct {
	list []*errdetails.BadRequest_FieldViolation
}

func (v *violations) add(field, format string, args ...any) {
	v.list = append(v.list, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// err returns nil or InvalidArgument carrying a BadRequest detail.
func (v *violations) err() error {
	if len(v.list) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(v.list))
	for _, fv := range v.list {
		msgs = append(msgs, fv.GetField()+": "+fv.GetDescription())
	}
	st := status.New(codes.InvalidArgument, "invalid request: "+strings.Join(msgs, "; "))
	if withDetails, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: v.list}); err == nil {
		st = withDetails
	}
	return st.Err()
}

func (v *violations) dnsLabel(field, s string) {
	switch {
	case s == "":
		v.add(field, "must not be empty")
	case len(s) > 63:
		v.add(field, "must be at most 63 characters, got %d", len(s))
	case !framework.IsDNSLabel(s):
		v.add(field, "must be lower-case alphanumerics and '-', starting and ending alphanumeric (DNS-1123 label), got %q", s)
	}
}

func (v *violations) dnsSubdomain(field, s string) {
	switch {
	case s == "":
		v.add(field, "must not be empty")
	case len(s) > 253:
		v.add(field, "must be at most 253 characters, got %d", len(s))
	case !framework.IsDNSSubdomain(s):
		v.add(field, "must be lower-case alphanumerics, '-' and '.', starting and ending alphanumeric (DNS-1123 subdomain), got %q", s)
	}
}

// qualifiedName checks a label key, taint key or extended resource name:
// an optional DNS subdomain prefix and '/', then a name of up to 63.
func (v *violations) qualifiedName(field, s string) {
	if s == "" {
		v.add(field, "must not be empty")
		return
	}
	name := s
	if prefix, rest, ok := strings.Cut(s, "/"); ok {
		if prefix == "" || len(prefix) > 253 || !framework.IsDNSSubdomain(prefix) {
			v.add(field, "prefix of %q must be a DNS-1123 subdomain", s)
			return
		}
		name = rest
	}
	if len(name) > 63 || !framework.IsLabelName(name) {
		v.add(field, "name part of %q must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric", s)
	}
}

func (v *violations) labels(field string, labels map[string]string) {
	if len(labels) > maxLabels {
		v.add(field, "at most %d entries, got %d", maxLabels, len(labels))
		return
	}
	for k, val := range labels {
		v.qualifiedName(field+"["+k+"]", k)
		if len(val) > maxLabelValueLen || !framework.IsLabelValue(val) {
			v.add(field+"["+k+"]", "value %q must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric", val)
		}
	}
}

// resources checks names and quantities. Units are fixed per name, so an
// unknown name without a domain prefix is almost always a typo ("cpus").
func (v *violations) resources(field string, rl map[string]int64, allowPods bool) {
	for name := range rl {
		f := field + "[" + name + "]"
		switch name {
		case framework.ResourceCPU, framework.ResourceMemory, framework.ResourceEphemeralStorage:
		case framework.ResourcePods:
			if !allowPods {
				v.add(f, "pods is a node capacity and cannot be requested")
			}
		default:
			if !strings.Contains(name, "/") {
				v.add(f, "unknown resource %q: use cpu (millicores), memory or ephemeral-storage (bytes), pods, or an extended name like example.com/gpu", name)
				continue
			}
			v.qualifiedName(f, name)
		}
	}
	// Quantities are bounded by limits.Quantities and limits.Allocatable,
	// which also see the sums a single value cannot show.
}

// addLimits adds the violations of a limits check, their fields under
// prefix ("" for a whole-request check).
func (v *violations) addLimits(prefix string, found []limits.Violation) {
	for _, f := range found {
		field := f.Field
		switch {
		case prefix == "":
		case field == "":
			field = prefix
		default:
			field = prefix + "." + field
		}
		v.add(field, "%s", f.Description)
	}
}

func validateNode(v *violations, field string, n *berthv1.Node) {
	if n == nil {
		v.add(field, "is required")
		return
	}
	v.dnsSubdomain(field+".name", n.GetName())
	v.resources(field+".allocatable", n.GetAllocatable(), true)
	v.addLimits("", limits.Allocatable(field, n))
	v.labels(field+".labels", n.GetLabels())
	if ttl := n.GetLeaseTtlSeconds(); ttl < 0 || ttl > store.MaxNodeLeaseTTL {
		v.add(field+".lease_ttl_seconds", "must be 0 (no lease) to %d, got %d", store.MaxNodeLeaseTTL, ttl)
	}
	if len(n.GetTaints()) > maxTaints {
		v.add(field+".taints", "at most %d taints, got %d", maxTaints, len(n.GetTaints()))
	}
	for i, t := range n.GetTaints() {
		f := fmt.Sprintf("%s.taints[%d]", field, i)
		v.qualifiedName(f+".key", t.GetKey())
		if len(t.GetValue()) > maxLabelValueLen || !framework.IsLabelValue(t.GetValue()) {
			v.add(f+".value", "must be a label value, got %q", t.GetValue())
		}
		if !convert.KnownTaintEffect(t.GetEffect()) {
			v.add(f+".effect", "must be TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_PREFER_NO_SCHEDULE or TAINT_EFFECT_NO_EXECUTE, got %v", t.GetEffect())
		}
	}
	if len(n.GetImages()) > maxImages {
		v.add(field+".images", "at most %d images, got %d", maxImages, len(n.GetImages()))
	}
	for i, img := range n.GetImages() {
		f := fmt.Sprintf("%s.images[%d]", field, i)
		if len(img.GetNames()) == 0 {
			v.add(f+".names", "must name the image")
		}
		if img.GetSizeBytes() < 0 {
			v.add(f+".size_bytes", "must not be negative")
		}
	}
}

func validatePod(v *violations, field string, p *berthv1.Pod) {
	if p == nil {
		v.add(field, "is required")
		return
	}
	v.dnsLabel(field+".namespace", p.GetNamespace())
	v.dnsSubdomain(field+".name", p.GetName())
	if len(p.GetUid()) > maxUIDLen {
		v.add(field+".uid", "must be at most %d characters", maxUIDLen)
	}
	v.labels(field+".labels", p.GetLabels())
	if p.GetNodeName() != "" {
		v.dnsSubdomain(field+".node_name", p.GetNodeName())
	}
	if len(p.GetSchedulerName()) > maxSchedulerName {
		v.add(field+".scheduler_name", "must be at most %d characters", maxSchedulerName)
	}
	if len(p.GetContainers()) == 0 {
		v.add(field+".containers", "at least one container is required")
	}
	if len(p.GetContainers())+len(p.GetInitContainers()) > maxContainers {
		v.add(field+".containers", "at most %d containers and init containers together", maxContainers)
	}
	// Names are unique across containers and init containers together.
	seen := map[string]bool{}
	validateContainers(v, field+".containers", p.GetContainers(), seen)
	validateContainers(v, field+".init_containers", p.GetInitContainers(), seen)
	v.resources(field+".overhead", p.GetOverhead(), false)
	v.addLimits("", limits.Quantities(field, p))
	v.labels(field+".node_selector", p.GetNodeSelector())
	validateTolerations(v, field+".tolerations", p.GetTolerations())
	validateAffinity(v, field+".affinity", p.GetAffinity())
	for i, c := range p.GetTopologySpreadConstraints() {
		f := fmt.Sprintf("%s.topology_spread_constraints[%d]", field, i)
		if c.GetMaxSkew() < 1 {
			v.add(f+".max_skew", "must be at least 1, got %d", c.GetMaxSkew())
		}
		if c.GetTopologyKey() == "" {
			v.add(f+".topology_key", "must not be empty")
		}
		validateLabelSelector(v, f+".label_selector", c.GetLabelSelector())
		if c.GetMinDomains() < 0 {
			v.add(f+".min_domains", "must not be negative")
		}
		if c.GetMinDomains() > 0 && c.GetWhenUnsatisfiable() == berthv1.UnsatisfiableConstraintAction_UNSATISFIABLE_CONSTRAINT_ACTION_SCHEDULE_ANYWAY {
			v.add(f+".min_domains", "only applies with when_unsatisfiable DO_NOT_SCHEDULE")
		}
	}
	for i, g := range p.GetSchedulingGates() {
		v.qualifiedName(fmt.Sprintf("%s.scheduling_gates[%d]", field, i), g)
	}
	if p.GetPodGroup() != "" {
		v.dnsSubdomain(field+".pod_group", p.GetPodGroup())
	}
}

// validateContainers checks one list of a pod's containers; seen collects
// the names across lists.
func validateContainers(v *violations, field string, cs []*berthv1.Container, seen map[string]bool) {
	for i, c := range cs {
		f := fmt.Sprintf("%s[%d]", field, i)
		v.dnsLabel(f+".name", c.GetName())
		if seen[c.GetName()] {
			v.add(f+".name", "duplicate container name %q", c.GetName())
		}
		seen[c.GetName()] = true
		v.resources(f+".requests", c.GetRequests(), false)
		for j, port := range c.GetPorts() {
			pf := fmt.Sprintf("%s.ports[%d]", f, j)
			if port.GetContainerPort() < 1 || port.GetContainerPort() > 65535 {
				v.add(pf+".container_port", "must be 1-65535, got %d", port.GetContainerPort())
			}
			if port.GetHostPort() < 0 || port.GetHostPort() > 65535 {
				v.add(pf+".host_port", "must be 0-65535, got %d", port.GetHostPort())
			}
			if !convert.KnownProtocol(port.GetProtocol()) {
				v.add(pf+".protocol", "unknown protocol %v", port.GetProtocol())
			}
		}
	}
}

func validateTolerations(v *violations, field string, ts []*berthv1.Toleration) {
	for i, t := range ts {
		f := fmt.Sprintf("%s[%d]", field, i)
		exists := t.GetOperator() == berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS
		if t.GetKey() == "" && !exists {
			v.add(f+".key", "may be empty only with operator EXISTS")
		} else if t.GetKey() != "" {
			v.qualifiedName(f+".key", t.GetKey())
		}
		if exists && t.GetValue() != "" {
			v.add(f+".value", "must be empty with operator EXISTS")
		}
		if t.GetEffect() != berthv1.TaintEffect_TAINT_EFFECT_UNSPECIFIED {
			if !convert.KnownTaintEffect(t.GetEffect()) {
				v.add(f+".effect", "unknown effect %v", t.GetEffect())
			}
		}
	}
}

// validateNodeTerm checks a node selector term as the Kubernetes API does:
// In and NotIn need values, Exists and DoesNotExist take none, Gt and Lt take
// one integer, and the only field is metadata.name.
func validateNodeTerm(v *violations, field string, t *berthv1.NodeSelectorTerm) {
	check := func(kind string, reqs []*berthv1.NodeSelectorRequirement) {
		for i, r := range reqs {
			f := fmt.Sprintf("%s.%s[%d]", field, kind, i)
			if kind == "match_fields" {
				if r.GetKey() != "metadata.name" {
					v.add(f+".key", "only metadata.name can be matched as a field, got %q", r.GetKey())
				}
			} else {
				v.qualifiedName(f+".key", r.GetKey())
			}
			n := len(r.GetValues())
			switch r.GetOperator() {
			case berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_IN, berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_NOT_IN:
				if n == 0 {
					v.add(f+".values", "must not be empty with operator %v", r.GetOperator())
				}
			case berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_EXISTS, berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_DOES_NOT_EXIST:
				if n != 0 {
					v.add(f+".values", "must be empty with operator %v", r.GetOperator())
				}
			case berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_GT, berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_LT:
				if n != 1 {
					v.add(f+".values", "must hold exactly one integer with operator %v", r.GetOperator())
				} else if _, err := strconv.ParseInt(r.GetValues()[0], 10, 64); err != nil {
					v.add(f+".values", "%q is not an integer", r.GetValues()[0])
				}
			default:
				v.add(f+".operator", "unknown operator %v", r.GetOperator())
			}
			if kind == "match_fields" && r.GetOperator() != berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_IN &&
				r.GetOperator() != berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_NOT_IN {
				v.add(f+".operator", "fields can only be matched with IN or NOT_IN")
			}
		}
	}
	check("match_expressions", t.GetMatchExpressions())
	check("match_fields", t.GetMatchFields())
}

// validateLabelSelector checks a pod label selector's expressions.
func validateLabelSelector(v *violations, field string, s *berthv1.LabelSelector) {
	if s == nil {
		return
	}
	v.labels(field+".match_labels", s.GetMatchLabels())
	for i, r := range s.GetMatchExpressions() {
		f := fmt.Sprintf("%s.match_expressions[%d]", field, i)
		v.qualifiedName(f+".key", r.GetKey())
		n := len(r.GetValues())
		switch r.GetOperator() {
		case berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_IN, berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_NOT_IN:
			if n == 0 {
				v.add(f+".values", "must not be empty with operator %v", r.GetOperator())
			}
		case berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_EXISTS, berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST:
			if n != 0 {
				v.add(f+".values", "must be empty with operator %v", r.GetOperator())
			}
		default:
			v.add(f+".operator", "unknown operator %v", r.GetOperator())
		}
	}
}

func validateAffinity(v *violations, field string, a *berthv1.Affinity) {
	if a == nil {
		return
	}
	for i, t := range a.GetNodeAffinity().GetRequired().GetNodeSelectorTerms() {
		validateNodeTerm(v, fmt.Sprintf("%s.node_affinity.required.node_selector_terms[%d]", field, i), t)
	}
	for i, p := range a.GetNodeAffinity().GetPreferred() {
		validateNodeTerm(v, fmt.Sprintf("%s.node_affinity.preferred[%d].preference", field, i), p.GetPreference())
	}
	for i, pref := range a.GetNodeAffinity().GetPreferred() {
		if w := pref.GetWeight(); w < 1 || w > 100 {
			v.add(fmt.Sprintf("%s.node_affinity.preferred[%d].weight", field, i), "must be 1-100, got %d", w)
		}
	}
	if req := a.GetNodeAffinity().GetRequired(); req != nil && len(req.GetNodeSelectorTerms()) == 0 {
		v.add(field+".node_affinity.required.node_selector_terms", "must have at least one term")
	}
	terms := func(kind string, req []*berthv1.PodAffinityTerm, pref []*berthv1.WeightedPodAffinityTerm) {
		for i, t := range req {
			if t.GetTopologyKey() == "" {
				v.add(fmt.Sprintf("%s.%s.required[%d].topology_key", field, kind, i), "must not be empty")
			}
			validateLabelSelector(v, fmt.Sprintf("%s.%s.required[%d].label_selector", field, kind, i), t.GetLabelSelector())
		}
		for i, t := range pref {
			f := fmt.Sprintf("%s.%s.preferred[%d]", field, kind, i)
			if w := t.GetWeight(); w < 1 || w > 100 {
				v.add(f+".weight", "must be 1-100, got %d", w)
			}
			if t.GetTerm().GetTopologyKey() == "" {
				v.add(f+".term.topology_key", "must not be empty")
			}
			validateLabelSelector(v, f+".term.label_selector", t.GetTerm().GetLabelSelector())
		}
	}
	terms("pod_affinity", a.GetPodAffinity().GetRequired(), a.GetPodAffinity().GetPreferred())
	terms("pod_anti_affinity", a.GetPodAntiAffinity().GetRequired(), a.GetPodAntiAffinity().GetPreferred())
}

func validatePage(v *violations, size int32) {
	if size < 0 || size > maxPageSize {
		v.add("page_size", "must be 0-%d, got %d", maxPageSize, size)
	}
}

// maxReportText bounds the reason or message of an orchestrator's report,
// which is kept in the pod's status.
const maxReportText = 1024

// validatePodReport checks the fields the orchestrator's reports about a
// pod share. The uid is required: it is what keeps a late report from
// touching a newer pod of the same name.
func validatePodReport(v *violations, namespace, name, uid, node, textField, text string) {
	v.dnsLabel("namespace", namespace)
	v.dnsSubdomain("name", name)
	switch {
	case uid == "":
		v.add("uid", "is required: the uid of the pod the report is about")
	case len(uid) > maxUIDLen:
		v.add("uid", "must be at most %d characters", maxUIDLen)
	}
	if node != "" {
		v.dnsSubdomain("node_name", node)
	}
	if len(text) > maxReportText {
		v.add(textField, "must be at most %d bytes, got %d", maxReportText, len(text))
	}
}
