package conformance

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-io/berth/scheduler/framework"
)

// The conversion below is what an orchestrator adapter does: Kubernetes
// objects become Berth's core types, quantities in Berth's units (cpu in
// millicores, everything else as an integer).

func toBerthResources(rl v1.ResourceList) framework.ResourceList {
	if len(rl) == 0 {
		return nil
	}
	out := framework.ResourceList{}
	for name, q := range rl {
		if name == v1.ResourceCPU {
			out[string(name)] = q.MilliValue()
		} else {
			out[string(name)] = q.Value()
		}
	}
	return out
}

func toBerthNode(n *v1.Node) *framework.Node {
	out := &framework.Node{
		Name: n.Name, Unschedulable: n.Spec.Unschedulable,
		Allocatable: toBerthResources(n.Status.Allocatable), Labels: n.Labels,
	}
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, framework.Taint{Key: t.Key, Value: t.Value, Effect: framework.TaintEffect(t.Effect)})
	}
	for _, img := range n.Status.Images {
		out.Images = append(out.Images, framework.ContainerImage{Names: img.Names, SizeBytes: img.SizeBytes})
	}
	return out
}

func toBerthContainers(cs []v1.Container) []framework.Container {
	var out []framework.Container
	for _, c := range cs {
		bc := framework.Container{Name: c.Name, Image: c.Image, Requests: toBerthResources(c.Resources.Requests)}
		for _, p := range c.Ports {
			bc.Ports = append(bc.Ports, framework.ContainerPort{ContainerPort: p.ContainerPort, HostPort: p.HostPort, Protocol: framework.Protocol(p.Protocol), HostIP: p.HostIP})
		}
		out = append(out, bc)
	}
	return out
}

func toBerthPod(p *v1.Pod) *framework.Pod {
	out := &framework.Pod{
		Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Labels: p.Labels,
		Containers: toBerthContainers(p.Spec.Containers), NodeName: p.Spec.NodeName, SchedulerName: p.Spec.SchedulerName,
		NodeSelector: p.Spec.NodeSelector, Phase: framework.PodPending,
	}
	if ex := (framework.PodExtras{
		InitContainers: toBerthContainers(p.Spec.InitContainers),
		Overhead:       toBerthResources(p.Spec.Overhead),
	}); !ex.IsZero() {
		out.Extras = &ex
	}
	if p.Spec.NodeName != "" {
		out.Phase = framework.PodRunning
	}
	if p.Status.StartTime != nil {
		out.StartTime = p.Status.StartTime.Time
	}
	if p.Spec.Priority != nil {
		out.Priority = *p.Spec.Priority
	}
	if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == v1.PreemptNever {
		out.PreemptionPolicy = framework.PreemptNever
	}
	for _, t := range p.Spec.Tolerations {
		out.Tolerations = append(out.Tolerations, framework.Toleration{Key: t.Key, Operator: framework.TolerationOperator(t.Operator),
			Value: t.Value, Effect: framework.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds})
	}
	if a := p.Spec.Affinity; a != nil {
		out.Affinity = &framework.Affinity{}
		if na := a.NodeAffinity; na != nil {
			out.Affinity.NodeAffinity = &framework.NodeAffinity{}
			if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
				out.Affinity.NodeAffinity.Required = &framework.NodeSelector{}
				for _, t := range r.NodeSelectorTerms {
					out.Affinity.NodeAffinity.Required.NodeSelectorTerms = append(out.Affinity.NodeAffinity.Required.NodeSelectorTerms, toBerthTerm(t))
				}
			}
			for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				out.Affinity.NodeAffinity.Preferred = append(out.Affinity.NodeAffinity.Preferred,
					framework.PreferredSchedulingTerm{Weight: t.Weight, Preference: toBerthTerm(t.Preference)})
			}
		}
		if pa := a.PodAffinity; pa != nil {
			out.Affinity.PodAffinity = &framework.PodAffinity{
				Required: toBerthAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution), Preferred: toBerthWeighted(pa.PreferredDuringSchedulingIgnoredDuringExecution)}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			out.Affinity.PodAntiAffinity = &framework.PodAntiAffinity{
				Required: toBerthAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution), Preferred: toBerthWeighted(pa.PreferredDuringSchedulingIgnoredDuringExecution)}
		}
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		bc := framework.TopologySpreadConstraint{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey,
			WhenUnsatisfiable: framework.UnsatisfiableConstraintAction(c.WhenUnsatisfiable), LabelSelector: toBerthSelector(c.LabelSelector),
			MinDomains: c.MinDomains, MatchLabelKeys: c.MatchLabelKeys}
		if c.NodeAffinityPolicy != nil {
			bc.NodeAffinityPolicy = framework.NodeInclusionPolicy(*c.NodeAffinityPolicy)
		}
		if c.NodeTaintsPolicy != nil {
			bc.NodeTaintsPolicy = framework.NodeInclusionPolicy(*c.NodeTaintsPolicy)
		}
		out.TopologySpreadConstraints = append(out.TopologySpreadConstraints, bc)
	}
	return out
}

func toBerthRequirements(rs []v1.NodeSelectorRequirement) []framework.NodeSelectorRequirement {
	var out []framework.NodeSelectorRequirement
	for _, r := range rs {
		out = append(out, framework.NodeSelectorRequirement{Key: r.Key, Operator: framework.NodeSelectorOperator(r.Operator), Values: r.Values})
	}
	return out
}

func toBerthTerm(t v1.NodeSelectorTerm) framework.NodeSelectorTerm {
	return framework.NodeSelectorTerm{MatchExpressions: toBerthRequirements(t.MatchExpressions), MatchFields: toBerthRequirements(t.MatchFields)}
}

func toBerthSelector(s *metav1.LabelSelector) *framework.LabelSelector {
	if s == nil {
		return nil
	}
	out := &framework.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, framework.LabelSelectorRequirement{Key: r.Key, Operator: framework.LabelSelectorOperator(r.Operator), Values: r.Values})
	}
	return out
}

// toBerthAffinityTerms keeps matchLabelKeys raw: Berth applies them
// itself, where kube relies on the API server having merged them.
func toBerthAffinityTerms(ts []v1.PodAffinityTerm) []framework.PodAffinityTerm {
	var out []framework.PodAffinityTerm
	for _, t := range ts {
		out = append(out, framework.PodAffinityTerm{LabelSelector: toBerthSelector(t.LabelSelector), Namespaces: t.Namespaces,
			// Only the empty namespace selector (every namespace) is
			// generated: Berth has no namespace labels.
			AllNamespaces: t.NamespaceSelector != nil, TopologyKey: t.TopologyKey,
			MatchLabelKeys: t.MatchLabelKeys, MismatchLabelKeys: t.MismatchLabelKeys})
	}
	return out
}

func toBerthWeighted(ts []v1.WeightedPodAffinityTerm) []framework.WeightedPodAffinityTerm {
	var out []framework.WeightedPodAffinityTerm
	for _, t := range ts {
		out = append(out, framework.WeightedPodAffinityTerm{Weight: t.Weight, Term: toBerthAffinityTerms([]v1.PodAffinityTerm{t.PodAffinityTerm})[0]})
	}
	return out
}
