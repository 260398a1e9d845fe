// Package convert turns wire (protobuf) types into the scheduling core's
// types and back. It is the one place that knows both: the core never sees
// protobuf, and the gRPC front and the replica's store bridge never build a
// core value by hand.
package convert

import (
	"errors"
	"fmt"
	"maps"
	"unsafe"

	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
)

var taintEffects = map[berthv1.TaintEffect]framework.TaintEffect{
	berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE:        framework.TaintEffectNoSchedule,
	berthv1.TaintEffect_TAINT_EFFECT_PREFER_NO_SCHEDULE: framework.TaintEffectPreferNoSchedule,
	berthv1.TaintEffect_TAINT_EFFECT_NO_EXECUTE:         framework.TaintEffectNoExecute,
}

var podPhases = map[berthv1.PodPhase]framework.PodPhase{
	berthv1.PodPhase_POD_PHASE_PENDING:       framework.PodPending,
	berthv1.PodPhase_POD_PHASE_BOUND:         framework.PodBound,
	berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE: framework.PodUnschedulable,
	berthv1.PodPhase_POD_PHASE_RUNNING:       framework.PodRunning,
	berthv1.PodPhase_POD_PHASE_SUCCEEDED:     framework.PodSucceeded,
	berthv1.PodPhase_POD_PHASE_FAILED:        framework.PodFailed,
}

var protocols = map[berthv1.Protocol]framework.Protocol{
	berthv1.Protocol_PROTOCOL_UNSPECIFIED: framework.ProtocolTCP,
	berthv1.Protocol_PROTOCOL_TCP:         framework.ProtocolTCP,
	berthv1.Protocol_PROTOCOL_UDP:         framework.ProtocolUDP,
	berthv1.Protocol_PROTOCOL_SCTP:        framework.ProtocolSCTP,
}

var labelOps = map[berthv1.LabelSelectorOperator]framework.LabelSelectorOperator{
	berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_IN:             framework.LabelSelectorOpIn,
	berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_NOT_IN:         framework.LabelSelectorOpNotIn,
	berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_EXISTS:         framework.LabelSelectorOpExists,
	berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST: framework.LabelSelectorOpDoesNotExist,
}

var nodeOps = map[berthv1.NodeSelectorOperator]framework.NodeSelectorOperator{
	berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_IN:             framework.NodeSelectorOpIn,
	berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_NOT_IN:         framework.NodeSelectorOpNotIn,
	berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_EXISTS:         framework.NodeSelectorOpExists,
	berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_DOES_NOT_EXIST: framework.NodeSelectorOpDoesNotExist,
	berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_GT:             framework.NodeSelectorOpGt,
	berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_LT:             framework.NodeSelectorOpLt,
}

var inclusionPolicies = map[berthv1.NodeInclusionPolicy]framework.NodeInclusionPolicy{
	berthv1.NodeInclusionPolicy_NODE_INCLUSION_POLICY_HONOR:  framework.NodeInclusionPolicyHonor,
	berthv1.NodeInclusionPolicy_NODE_INCLUSION_POLICY_IGNORE: framework.NodeInclusionPolicyIgnore,
}

// KnownTaintEffect tells whether e is an effect the core understands;
// validation rejects the others before they reach conversion.
func KnownTaintEffect(e berthv1.TaintEffect) bool {
	_, ok := taintEffects[e]
	return ok
}

// KnownProtocol tells whether p is a port protocol the core understands.
func KnownProtocol(p berthv1.Protocol) bool {
	_, ok := protocols[p]
	return ok
}

// DefaultMaxPods is the pod capacity of a node whose allocatable omits
// "pods", as a kubelet would default it.
const DefaultMaxPods = 110

// unreachableTaint is how the core sees a node whose lease expired: as
// Kubernetes' unreachable taint, so pods that tolerate it may still land.
var unreachableTaint = framework.Taint{Key: framework.TaintNodeUnreachable, Effect: framework.TaintEffectNoSchedule}

// NodeToCore converts a validated wire node, stored at modRevision, whose
// lease (if it has one) is expired when unreachable.
func NodeToCore(n *berthv1.Node, modRevision int64, unreachable bool) *framework.Node {
	alloc := framework.ResourceList(n.GetAllocatable())
	if _, ok := alloc[framework.ResourcePods]; !ok {
		// A node that does not say how many pods it takes gets the
		// kubelet's default rather than room for none.
		alloc = maps.Clone(alloc)
		if alloc == nil {
			alloc = framework.ResourceList{}
		}
		alloc[framework.ResourcePods] = DefaultMaxPods
	}
	out := &framework.Node{
		Name:          n.GetName(),
		Allocatable:   alloc,
		Labels:        n.GetLabels(),
		Unschedulable: n.GetUnschedulable(),
		Revision:      modRevision,
	}
	for _, t := range n.GetTaints() {
		out.Taints = append(out.Taints, framework.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: taintEffects[t.GetEffect()]})
	}
	if unreachable {
		out.Taints = append(out.Taints, unreachableTaint)
	}
	for _, img := range n.GetImages() {
		out.Images = append(out.Images, framework.ContainerImage{Names: img.GetNames(), SizeBytes: img.GetSizeBytes()})
	}
	return out
}

// PodToCore converts a wire pod read at modRevision whose stored bytes
// are not at hand: it encodes p as its record. A pod delivered by the store
// comes through StoredPodToCore, which keeps the bytes etcd gave instead.
func PodToCore(p *berthv1.Pod, modRevision int64) *framework.Pod {
	return StoredPodToCore(p, nil, modRevision)
}

// storedPodOptions encode as the store does.
var storedPodOptions = proto.MarshalOptions{Deterministic: true}

// StoredPodToCore converts a stored pod: p decoded from stored, the value
// written at modRevision. stored becomes the core pod's Source, so it must
// not change afterwards; a decision about the pod decodes it (WirePod),
// changes the copy and writes it back, with no read. If stored is empty
// (a record not read from etcd), p is encoded in its place.
//
// A pod on a node keeps no Source: the core decides nothing more about it
// but, rarely, to preempt it, and then the committer reads its record.
// Bound pods are nearly all the pods a large cluster holds, and their
// records were about a third of the core's memory.
func StoredPodToCore(p *berthv1.Pod, stored []byte, modRevision int64) *framework.Pod {
	out := podToCore(p, modRevision)
	if out.NodeName != "" {
		return out
	}
	if len(stored) == 0 {
		var err error
		if stored, err = storedPodOptions.Marshal(p); err != nil {
			stored = nil // WirePod reports the pod has no record
		}
	}
	// The string shares stored's bytes: the contract above keeps them
	// unchanged, and a copy would double what the core holds per pod.
	out.Source = unsafe.String(unsafe.SliceData(stored), len(stored))
	return out
}

// ErrNoRecord: the core pod does not hold its stored record (a pod on a
// node, or one built by hand); the caller reads it from the store.
var ErrNoRecord = errors.New("convert: the pod holds no stored record")

// WirePod decodes the stored record a core pod was converted from, as a
// copy the caller may change; the error wraps ErrNoRecord if it has none.
func WirePod(p *framework.Pod) (*berthv1.Pod, error) {
	record, err := StoredRecord(p)
	if err != nil {
		return nil, err
	}
	w := &berthv1.Pod{}
	// Unmarshal copies what it keeps and does not write its input.
	if err := proto.Unmarshal(record, w); err != nil {
		return nil, fmt.Errorf("convert: pod %s: decode stored record: %w", p.Key(), err)
	}
	return w, nil
}

// podToCore converts everything but the Source. Values that repeat across
// pods (labels, selectors, containers, names) are shared through the
// interner, so a hundred thousand pods of one workload hold one copy.
func podToCore(p *berthv1.Pod, modRevision int64) *framework.Pod {
	out := &framework.Pod{
		Namespace:                 p.GetNamespace(),
		Name:                      p.GetName(),
		UID:                       p.GetUid(),
		Labels:                    p.GetLabels(),
		Priority:                  p.GetPriority(),
		Containers:                containersToCore(p.GetContainers()),
		NodeName:                  p.GetNodeName(),
		SchedulerName:             p.GetSchedulerName(),
		NodeSelector:              p.GetNodeSelector(),
		Affinity:                  affinityToCore(p.GetAffinity()),
		PreemptionPolicy:          framework.PreemptLowerPriority,
		PodGroup:                  p.GetPodGroup(),
		Tolerations:               tolerationsToCore(p.GetTolerations()),
		TopologySpreadConstraints: spreadToCore(p.GetTopologySpreadConstraints()),
		Revision:                  modRevision,
	}
	ex := framework.PodExtras{
		InitContainers:  containersToCore(p.GetInitContainers()),
		Overhead:        framework.ResourceList(p.GetOverhead()),
		SchedulingGates: p.GetSchedulingGates(),
	}
	statusToCore(out, &ex, p.GetStatus())
	if !ex.IsZero() {
		own := ex // only a pod with extras allocates them
		out.Extras = &own
	}
	pods.pod(out)
	if out.Phase == 0 {
		out.Phase = framework.PodPending
	}
	if p.GetPreemptionPolicy() == berthv1.PreemptionPolicy_PREEMPTION_POLICY_NEVER {
		out.PreemptionPolicy = framework.PreemptNever
	}
	return out
}

// statusToCore sets what out and its extras ex keep of a stored status
// (nil: none).
func statusToCore(out *framework.Pod, ex *framework.PodExtras, st *berthv1.PodStatus) {
	out.Phase = podPhases[st.GetPhase()]
	ex.NominatedNodeName = st.GetNominatedNodeName()
	ex.StatusMessage = st.GetMessage()
	ex.PreemptedBy = st.GetPreemptedBy()
	if ts := st.GetStartTime(); ts != nil {
		out.StartTime = ts.AsTime()
	}
	for _, r := range st.GetRejections() {
		if ex.Rejections == nil {
			ex.Rejections = map[string]int64{}
		}
		ex.Rejections[r.GetNodeName()] = r.GetNodeRevision() // the latest per node wins
	}
}

func tolerationsToCore(ts []*berthv1.Toleration) []framework.Toleration {
	var out []framework.Toleration
	for _, t := range ts {
		tol := framework.Toleration{Key: t.GetKey(), Operator: framework.TolerationOpEqual, Value: t.GetValue(), Effect: taintEffects[t.GetEffect()]}
		if t.GetOperator() == berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS {
			tol.Operator = framework.TolerationOpExists
		}
		if t.GetTolerationSeconds() > 0 {
			secs := t.GetTolerationSeconds()
			tol.TolerationSeconds = &secs
		}
		out = append(out, tol)
	}
	return out
}

func spreadToCore(cs []*berthv1.TopologySpreadConstraint) []framework.TopologySpreadConstraint {
	var out []framework.TopologySpreadConstraint
	for _, c := range cs {
		tsc := framework.TopologySpreadConstraint{
			MaxSkew:            c.GetMaxSkew(),
			TopologyKey:        c.GetTopologyKey(),
			WhenUnsatisfiable:  framework.DoNotSchedule,
			LabelSelector:      labelSelectorToCore(c.GetLabelSelector()),
			NodeAffinityPolicy: inclusionPolicies[c.GetNodeAffinityPolicy()],
			NodeTaintsPolicy:   inclusionPolicies[c.GetNodeTaintsPolicy()],
			MatchLabelKeys:     c.GetMatchLabelKeys(),
		}
		if c.GetWhenUnsatisfiable() == berthv1.UnsatisfiableConstraintAction_UNSATISFIABLE_CONSTRAINT_ACTION_SCHEDULE_ANYWAY {
			tsc.WhenUnsatisfiable = framework.ScheduleAnyway
		}
		if c.GetMinDomains() > 0 {
			md := c.GetMinDomains()
			tsc.MinDomains = &md
		}
		out = append(out, tsc)
	}
	return out
}

func containersToCore(cs []*berthv1.Container) []framework.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]framework.Container, len(cs))
	for i, c := range cs {
		out[i] = framework.Container{Name: c.GetName(), Image: c.GetImage(), Requests: framework.ResourceList(c.GetRequests())}
		for _, p := range c.GetPorts() {
			out[i].Ports = append(out[i].Ports, framework.ContainerPort{
				ContainerPort: p.GetContainerPort(), HostPort: p.GetHostPort(),
				Protocol: protocols[p.GetProtocol()], HostIP: p.GetHostIp(),
			})
		}
	}
	return out
}

func labelSelectorToCore(s *berthv1.LabelSelector) *framework.LabelSelector {
	if s == nil {
		return nil
	}
	out := &framework.LabelSelector{MatchLabels: pods.stringMap(s.GetMatchLabels())}
	for _, r := range s.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, framework.LabelSelectorRequirement{
			Key: r.GetKey(), Operator: labelOps[r.GetOperator()], Values: r.GetValues(),
		})
	}
	return out
}

func nodeSelectorTermToCore(t *berthv1.NodeSelectorTerm) framework.NodeSelectorTerm {
	var out framework.NodeSelectorTerm
	for _, r := range t.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, framework.NodeSelectorRequirement{Key: r.GetKey(), Operator: nodeOps[r.GetOperator()], Values: r.GetValues()})
	}
	for _, r := range t.GetMatchFields() {
		out.MatchFields = append(out.MatchFields, framework.NodeSelectorRequirement{Key: r.GetKey(), Operator: nodeOps[r.GetOperator()], Values: r.GetValues()})
	}
	return out
}

func podAffinityTermsToCore(ts []*berthv1.PodAffinityTerm) []framework.PodAffinityTerm {
	var out []framework.PodAffinityTerm
	for _, t := range ts {
		out = append(out, podAffinityTermToCore(t))
	}
	return out
}

func podAffinityTermToCore(t *berthv1.PodAffinityTerm) framework.PodAffinityTerm {
	return framework.PodAffinityTerm{
		LabelSelector:     labelSelectorToCore(t.GetLabelSelector()),
		Namespaces:        t.GetNamespaces(),
		AllNamespaces:     t.GetAllNamespaces(),
		TopologyKey:       t.GetTopologyKey(),
		MatchLabelKeys:    t.GetMatchLabelKeys(),
		MismatchLabelKeys: t.GetMismatchLabelKeys(),
	}
}

func weightedTermsToCore(ts []*berthv1.WeightedPodAffinityTerm) []framework.WeightedPodAffinityTerm {
	var out []framework.WeightedPodAffinityTerm
	for _, t := range ts {
		out = append(out, framework.WeightedPodAffinityTerm{Weight: t.GetWeight(), Term: podAffinityTermToCore(t.GetTerm())})
	}
	return out
}

func affinityToCore(a *berthv1.Affinity) *framework.Affinity {
	if a == nil {
		return nil
	}
	out := &framework.Affinity{}
	if na := a.GetNodeAffinity(); na != nil {
		out.NodeAffinity = &framework.NodeAffinity{}
		if req := na.GetRequired(); req != nil {
			sel := &framework.NodeSelector{}
			for _, t := range req.GetNodeSelectorTerms() {
				sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, nodeSelectorTermToCore(t))
			}
			out.NodeAffinity.Required = sel
		}
		for _, p := range na.GetPreferred() {
			out.NodeAffinity.Preferred = append(out.NodeAffinity.Preferred, framework.PreferredSchedulingTerm{
				Weight: p.GetWeight(), Preference: nodeSelectorTermToCore(p.GetPreference()),
			})
		}
	}
	if pa := a.GetPodAffinity(); pa != nil {
		out.PodAffinity = &framework.PodAffinity{Required: podAffinityTermsToCore(pa.GetRequired()), Preferred: weightedTermsToCore(pa.GetPreferred())}
	}
	if pa := a.GetPodAntiAffinity(); pa != nil {
		out.PodAntiAffinity = &framework.PodAntiAffinity{Required: podAffinityTermsToCore(pa.GetRequired()), Preferred: weightedTermsToCore(pa.GetPreferred())}
	}
	return out
}

// StoredRecord is p's stored record as bytes, shared, not copied: for
// readers only (decoders, byte patchers that build a new value), since
// the core keeps these bytes for the pod's life. The error wraps
// ErrNoRecord if p holds none.
func StoredRecord(p *framework.Pod) ([]byte, error) {
	if len(p.Source) == 0 {
		return nil, fmt.Errorf("%w: pod %s", ErrNoRecord, p.Key())
	}
	return unsafe.Slice(unsafe.StringData(p.Source), len(p.Source)), nil
}
