package server

import (
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/server/limits"
	"github.com/berth-io/berth/store"
)

// requestRule checks one request type's fields.
type requestRule struct {
	request protoreflect.FullName
	check   func(*violations, proto.Message)
}

// rule binds a check to the request type it takes.
func rule[T proto.Message](check func(v *violations, req T)) requestRule {
	var zero T
	return requestRule{
		request: zero.ProtoReflect().Descriptor().FullName(),
		check:   func(v *violations, m proto.Message) { check(v, m.(T)) },
	}
}

// nothingToCheck is the rule of a request whose fields are all valid
// whatever they hold; listing it says so, where leaving it out would
// reject the call.
func nothingToCheck[T proto.Message]() requestRule {
	return rule(func(*violations, T) {})
}

// requestRules holds a rule for every request type the front serves,
// health checks and reflection included. validateRequest rejects a request
// of any other type, so an RPC added without a rule fails its first call
// (and TestEveryRequestTypeHasARule) instead of going unchecked.
var requestRules = indexRules(
	// ClusterService.
	rule(func(v *violations, r *berthv1.UpsertNodeRequest) { validateNode(v, "node", r.GetNode()) }),
	rule(func(v *violations, r *berthv1.DeleteNodeRequest) { v.dnsSubdomain("name", r.GetName()) }),
	rule(func(v *violations, r *berthv1.GetNodeRequest) { v.dnsSubdomain("name", r.GetName()) }),
	rule(func(v *violations, r *berthv1.ListNodesRequest) { validatePage(v, r.GetPageSize()) }),
	rule(func(v *violations, r *berthv1.RenewNodeLeaseRequest) { v.dnsSubdomain("name", r.GetName()) }),
	rule(validateUpsertBudget),
	rule(func(v *violations, r *berthv1.DeleteDisruptionBudgetRequest) {
		v.dnsLabel("namespace", r.GetNamespace())
		v.dnsSubdomain("name", r.GetName())
	}),
	rule(func(v *violations, r *berthv1.ListDisruptionBudgetsRequest) { optionalNamespace(v, r.GetNamespace()) }),

	// PodService.
	rule(func(v *violations, r *berthv1.SubmitPodRequest) { validatePod(v, "pod", r.GetPod()) }),
	rule(func(v *violations, r *berthv1.SubmitPodsRequest) {
		// Individual pods are checked by the handler so one bad pod does
		// not sink the batch; only the batch shape is checked here.
		if n := len(r.GetPods()); n == 0 || n > maxSubmitBatch {
			v.add("pods", "must hold 1-%d pods, got %d", maxSubmitBatch, n)
		}
	}),
	rule(func(v *violations, r *berthv1.DeletePodRequest) {
		v.dnsLabel("namespace", r.GetNamespace())
		v.dnsSubdomain("name", r.GetName())
	}),
	rule(func(v *violations, r *berthv1.GetPodRequest) {
		v.dnsLabel("namespace", r.GetNamespace())
		v.dnsSubdomain("name", r.GetName())
	}),
	rule(validateListPods),
	rule(func(v *violations, r *berthv1.UpdatePodRequest) {
		v.dnsLabel("namespace", r.GetNamespace())
		v.dnsSubdomain("name", r.GetName())
		if !r.GetUpdateSchedulingGates() && r.Priority == nil {
			v.add("update_scheduling_gates", "nothing to update: set update_scheduling_gates or priority")
		}
	}),
	rule(func(v *violations, r *berthv1.ConfirmBindingRequest) {
		validatePodReport(v, r.GetNamespace(), r.GetName(), r.GetUid(), r.GetNodeName(), "", "")
	}),
	rule(func(v *violations, r *berthv1.RejectBindingRequest) {
		validatePodReport(v, r.GetNamespace(), r.GetName(), r.GetUid(), r.GetNodeName(), "reason", r.GetReason())
	}),
	rule(func(v *violations, r *berthv1.CompletePodRequest) {
		validatePodReport(v, r.GetNamespace(), r.GetName(), r.GetUid(), "", "message", r.GetMessage())
		if p := r.GetPhase(); !store.Finished(p) {
			v.add("phase", "must be POD_PHASE_SUCCEEDED or POD_PHASE_FAILED, got %v", p)
		}
	}),
	rule(func(v *violations, r *berthv1.UpsertPodGroupRequest) {
		validatePodGroup(v, "pod_group", r.GetPodGroup())
	}),
	rule(func(v *violations, r *berthv1.DeletePodGroupRequest) {
		v.dnsLabel("namespace", r.GetNamespace())
		v.dnsSubdomain("name", r.GetName())
	}),
	rule(func(v *violations, r *berthv1.GetPodGroupRequest) {
		v.dnsLabel("namespace", r.GetNamespace())
		v.dnsSubdomain("name", r.GetName())
	}),
	rule(func(v *violations, r *berthv1.ListPodGroupsRequest) { optionalNamespace(v, r.GetNamespace()) }),

	// SchedulerService.
	rule(func(v *violations, r *berthv1.ScheduleRequest) { validatePod(v, "pod", r.GetPod()) }),
	rule(validateExplain),
	rule(func(v *violations, r *berthv1.WatchBindingsRequest) {
		if r.GetFromRevision() < 0 {
			v.add("from_revision", "must not be negative, got %d", r.GetFromRevision())
		}
	}),
	nothingToCheck[*berthv1.ListReplicasRequest](),

	// Services the front hosts but does not define.
	nothingToCheck[*healthpb.HealthCheckRequest](),
	nothingToCheck[*healthpb.HealthListRequest](),
	nothingToCheck[*reflectionv1.ServerReflectionRequest](),
	nothingToCheck[*reflectionv1alpha.ServerReflectionRequest](),
)

func indexRules(rules ...requestRule) map[protoreflect.FullName]func(*violations, proto.Message) {
	out := make(map[protoreflect.FullName]func(*violations, proto.Message), len(rules))
	for _, r := range rules {
		if _, dup := out[r.request]; dup {
			panic("server: two validation rules for " + r.request)
		}
		out[r.request] = r.check
	}
	return out
}

// validateRequest checks a request before its handler runs. A request type
// without a rule is a server bug, reported as Internal rather than served
// unchecked.
func validateRequest(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "request of type %T is not a protobuf message", req)
	}
	name := m.ProtoReflect().Descriptor().FullName()
	check, ok := requestRules[name]
	if !ok {
		return status.Errorf(codes.Internal, "no validation rule for request type %s", name)
	}
	var v violations
	// The generic bounds come first: they keep the per-type rules (and
	// the answer) from working over a request of any size.
	v.addLimits("", apiLimits.Check(m))
	if len(v.list) > 0 {
		return v.err()
	}
	check(&v, m)
	return v.err()
}

// apiLimits bounds every request's enums, strings, lists and stored
// objects; see package limits.
var apiLimits = limits.Berth()

// validateSubmittedPod checks one pod of SubmitPods: the request-wide check
// left its items to the handler so each pod is answered on its own.
func validateSubmittedPod(v *violations, field string, p *berthv1.Pod) {
	if p != nil {
		v.addLimits(field, apiLimits.Check(p))
		if len(v.list) > 0 {
			return
		}
	}
	validatePod(v, field, p)
}

// optionalNamespace checks a namespace filter, where empty means all.
func optionalNamespace(v *violations, namespace string) {
	if namespace != "" {
		v.dnsLabel("namespace", namespace)
	}
}

func validateListPods(v *violations, r *berthv1.ListPodsRequest) {
	optionalNamespace(v, r.GetNamespace())
	if r.GetNodeName() != "" {
		v.dnsSubdomain("node_name", r.GetNodeName())
	}
	if _, ok := berthv1.PodPhase_name[int32(r.GetPhase())]; !ok {
		v.add("phase", "unknown phase %d", r.GetPhase())
	}
	validatePage(v, r.GetPageSize())
}

func validateExplain(v *violations, r *berthv1.ExplainRequest) {
	switch {
	case r.GetPod() != nil:
		validatePod(v, "pod", r.GetPod())
	case r.GetExisting() != nil:
		v.dnsLabel("existing.namespace", r.GetExisting().GetNamespace())
		v.dnsSubdomain("existing.name", r.GetExisting().GetName())
	default:
		v.add("target", "give a pod inline or name an existing one")
	}
}

func validateUpsertBudget(v *violations, r *berthv1.UpsertDisruptionBudgetRequest) {
	b := r.GetBudget()
	if b == nil {
		v.add("budget", "is required")
		return
	}
	v.dnsLabel("budget.namespace", b.GetNamespace())
	v.dnsSubdomain("budget.name", b.GetName())
	validateLabelSelector(v, "budget.selector", b.GetSelector())
	if b.GetSelector() == nil {
		v.add("budget.selector", "is required (an empty selector covers every pod in the namespace)")
	}
	if b.GetAllowedDisruptions() < 0 {
		v.add("budget.allowed_disruptions", "must not be negative, got %d", b.GetAllowedDisruptions())
	}
}
