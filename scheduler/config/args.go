package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/balancedallocation"
	"github.com/berth-io/berth/scheduler/plugins/defaultpreemption"
	"github.com/berth-io/berth/scheduler/plugins/helper"
	"github.com/berth-io/berth/scheduler/plugins/interpodaffinity"
	"github.com/berth-io/berth/scheduler/plugins/names"
	"github.com/berth-io/berth/scheduler/plugins/nodeaffinity"
	"github.com/berth-io/berth/scheduler/plugins/noderesources"
	"github.com/berth-io/berth/scheduler/plugins/podtopologyspread"
)

// decodeArgs turns one pluginConfig entry's args into the plugin's own
// args type, checking values as kube's validation does so problems come
// with a line. Plugins check their args again when built; this layer only
// adds the location. ok is false when Berth knows no args for the plugin.
func (p *problems) decodeArgs(plugin string, n *yaml.Node, path string) (args any, ok bool) {
	decode, ok := argsDecoders[plugin]
	if !ok {
		return nil, false
	}
	return decode(p, plugin, n, path), true
}

// argsDecoder decodes one plugin's args node; nil when decoding was cut
// short.
type argsDecoder func(p *problems, plugin string, n *yaml.Node, path string) any

// argsDecoders decode each plugin's args: into its v1 wire type, then,
// checked, into the plugin's Args.
var argsDecoders = map[string]argsDecoder{
	names.NodeResourcesFit:                viaWire((*problems).fitArgs),
	names.NodeResourcesBalancedAllocation: viaWire((*problems).balancedAllocationArgs),
	names.DefaultPreemption:               viaWire((*problems).defaultPreemptionArgs),
	names.InterPodAffinity:                viaWire((*problems).interPodAffinityArgs),
	names.NodeAffinity:                    viaWire((*problems).nodeAffinityArgs),
	names.PodTopologySpread:               viaWire((*problems).podTopologySpreadArgs),
}

// viaWire is the argsDecoder that decodes into the wire type W and builds
// the plugin's args from it with build.
func viaWire[W any, PW interface {
	*W
	meta() *typeMeta
}, A any](build func(*problems, PW, string) A) argsDecoder {
	return func(p *problems, plugin string, n *yaml.Node, path string) any {
		w := PW(new(W))
		if !p.decodeTyped(plugin, n, path, w, w.meta()) {
			return nil
		}
		return build(p, w, path)
	}
}

// decodeTyped decodes args into w and checks the optional apiVersion and
// kind kube lets args carry. It returns false when decoding was cut short
// and w is not worth checking.
func (p *problems) decodeTyped(plugin string, n *yaml.Node, path string, w any, tm *typeMeta) bool {
	p.decodeValue(n, path, w)
	if p.exhausted {
		return false
	}
	if tm.APIVersion != "" && tm.APIVersion != apiVersionV1 {
		p.addf(path+".apiVersion", "unsupported apiVersion %q (want %s)", tm.APIVersion, apiVersionV1)
	}
	if want := plugin + "Args"; tm.Kind != "" && tm.Kind != want {
		p.addf(path+".kind", "kind %q does not match plugin %s (want %s)", tm.Kind, plugin, want)
	}
	return true
}

const strategyTypes = "LeastAllocated, MostAllocated or RequestedToCapacityRatio"

func (p *problems) fitArgs(w *fitArgsV1, path string) *noderesources.FitArgs {
	out := &noderesources.FitArgs{IgnoredResources: w.IgnoredResources, IgnoredResourceGroups: w.IgnoredResourceGroups}
	for i, g := range w.IgnoredResourceGroups {
		if strings.Contains(g, "/") {
			p.addf(index(path+".ignoredResourceGroups", i), "resource group %q must not contain '/'", g)
		}
	}
	s := w.ScoringStrategy
	if s == nil {
		return out
	}
	sp := path + ".scoringStrategy"
	strategy := &noderesources.ScoringStrategy{Type: noderesources.ScoringStrategyType(s.Type)}
	switch strategy.Type {
	case noderesources.LeastAllocated, noderesources.MostAllocated, noderesources.RequestedToCapacityRatio:
	case "":
		p.addf(sp+".type", "required (want %s)", strategyTypes)
	default:
		p.addf(sp+".type", "unknown type %q (want %s)", s.Type, strategyTypes)
	}
	strategy.Resources = p.resourceSpecs(s.Resources, sp+".resources", 100)
	rp := sp + ".requestedToCapacityRatio"
	switch {
	case strategy.Type != noderesources.RequestedToCapacityRatio:
		if s.RequestedToCapacityRatio != nil {
			p.addf(rp, "only allowed when type is RequestedToCapacityRatio")
		}
	case s.RequestedToCapacityRatio == nil || len(s.RequestedToCapacityRatio.Shape) == 0:
		p.addf(rp+".shape", "at least one point is required when type is RequestedToCapacityRatio")
	default:
		shape := s.RequestedToCapacityRatio.Shape
		param := &noderesources.RequestedToCapacityRatioParam{Shape: make([]noderesources.UtilizationShapePoint, len(shape))}
		for i, pt := range shape {
			pp := index(rp+".shape", i)
			if pt.Utilization < 0 || pt.Utilization > 100 {
				p.addf(pp+".utilization", "%d not in valid range [0, 100]", pt.Utilization)
			} else if i > 0 && pt.Utilization <= shape[i-1].Utilization {
				p.addf(pp+".utilization", "%d must be greater than the previous point's %d (utilization must increase)", pt.Utilization, shape[i-1].Utilization)
			}
			if pt.Score < 0 || pt.Score > 10 {
				p.addf(pp+".score", "%d not in valid range [0, 10]", pt.Score)
			}
			param.Shape[i] = noderesources.UtilizationShapePoint{Utilization: pt.Utilization, Score: pt.Score}
		}
		strategy.RequestedToCapacityRatio = param
	}
	out.ScoringStrategy = strategy
	return out
}

// resourceSpecs converts scored resources; weight 0 means 1, as in kube.
func (p *problems) resourceSpecs(in []resourceSpecV1, path string, maxWeight int64) []helper.ResourceSpec {
	if len(in) == 0 {
		return nil
	}
	out := make([]helper.ResourceSpec, len(in))
	seen := map[string]int{}
	for i, r := range in {
		ip := index(path, i)
		if r.Name == "" {
			p.addf(ip+".name", "required")
		} else if j, ok := seen[r.Name]; ok {
			p.addf(ip+".name", "%q is already listed at %s", r.Name, index(path, j))
		} else {
			seen[r.Name] = i
		}
		if r.Weight < 0 || r.Weight > maxWeight {
			if maxWeight == 1 {
				p.addf(ip+".weight", "%d: must be 1 (this plugin does not weigh resources)", r.Weight)
			} else {
				p.addf(ip+".weight", "%d not in valid range [1, %d] (0 means 1)", r.Weight, maxWeight)
			}
		}
		out[i] = helper.ResourceSpec{Name: r.Name, Weight: r.Weight}
	}
	return out
}

func (p *problems) balancedAllocationArgs(w *balancedAllocationArgsV1, path string) *balancedallocation.Args {
	return &balancedallocation.Args{Resources: p.resourceSpecs(w.Resources, path+".resources", 1)}
}

func (p *problems) defaultPreemptionArgs(w *defaultPreemptionArgsV1, path string) *defaultpreemption.Args {
	pct, abs := defaultpreemption.DefaultMinCandidateNodesPercentage, defaultpreemption.DefaultMinCandidateNodesAbsolute
	if w.MinCandidateNodesPercentage != nil {
		pct = *w.MinCandidateNodesPercentage
	}
	if w.MinCandidateNodesAbsolute != nil {
		abs = *w.MinCandidateNodesAbsolute
	}
	if pct < 0 || pct > 100 {
		p.addf(path+".minCandidateNodesPercentage", "%d not in valid range [0, 100]", pct)
	}
	if abs < 0 {
		p.addf(path+".minCandidateNodesAbsolute", "%d must not be negative", abs)
	}
	if pct == 0 && abs == 0 {
		p.addf(path+".minCandidateNodesPercentage", "cannot be zero at the same time as minCandidateNodesAbsolute")
	}
	return &defaultpreemption.Args{
		MinCandidateNodesPercentage: w.MinCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   w.MinCandidateNodesAbsolute,
	}
}

func (p *problems) interPodAffinityArgs(w *interPodAffinityArgsV1, path string) *interpodaffinity.Args {
	if v := w.HardPodAffinityWeight; v != nil && (*v < 0 || *v > 100) {
		p.addf(path+".hardPodAffinityWeight", "%d not in valid range [0, 100]", *v)
	}
	return &interpodaffinity.Args{
		HardPodAffinityWeight:              w.HardPodAffinityWeight,
		IgnorePreferredTermsOfExistingPods: w.IgnorePreferredTermsOfExistingPods,
	}
}

func (p *problems) nodeAffinityArgs(w *nodeAffinityArgsV1, path string) *nodeaffinity.Args {
	out := &nodeaffinity.Args{}
	a := w.AddedAffinity
	if a == nil {
		return out
	}
	ap := path + ".addedAffinity"
	added := &framework.NodeAffinity{}
	if a.Required != nil {
		rp := ap + ".requiredDuringSchedulingIgnoredDuringExecution"
		sel := &framework.NodeSelector{}
		for i := range a.Required.NodeSelectorTerms {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, p.nodeSelectorTerm(&a.Required.NodeSelectorTerms[i], index(rp+".nodeSelectorTerms", i)))
		}
		added.Required = sel
	}
	pp := ap + ".preferredDuringSchedulingIgnoredDuringExecution"
	for i, t := range a.Preferred {
		ip := index(pp, i)
		added.Preferred = append(added.Preferred, framework.PreferredSchedulingTerm{
			Weight:     t.Weight,
			Preference: p.nodeSelectorTerm(&t.Preference, ip+".preference"),
		})
	}
	out.AddedAffinity = added
	return out
}

// nodeSelectorTerm converts a term, checking operators and value counts
// (the plugin checks label syntax when built).
func (p *problems) nodeSelectorTerm(t *nodeSelectorTermV1, path string) framework.NodeSelectorTerm {
	var out framework.NodeSelectorTerm
	for i, r := range t.MatchExpressions {
		rp := index(path+".matchExpressions", i)
		op := framework.NodeSelectorOperator(r.Operator)
		switch op {
		case framework.NodeSelectorOpIn, framework.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				p.addf(rp+".values", "must not be empty for operator %s", op)
			}
		case framework.NodeSelectorOpExists, framework.NodeSelectorOpDoesNotExist:
			if len(r.Values) != 0 {
				p.addf(rp+".values", "must be empty for operator %s", op)
			}
		case framework.NodeSelectorOpGt, framework.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				p.addf(rp+".values", "exactly one value is required for operator %s", op)
			} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				p.addf(index(rp+".values", 0), "%q is not an integer", r.Values[0])
			}
		default:
			p.addf(rp+".operator", "unknown operator %q (want In, NotIn, Exists, DoesNotExist, Gt or Lt)", r.Operator)
		}
		if r.Key == "" {
			p.addf(rp+".key", "required")
		}
		out.MatchExpressions = append(out.MatchExpressions, framework.NodeSelectorRequirement{Key: r.Key, Operator: op, Values: r.Values})
	}
	for i, r := range t.MatchFields {
		rp := index(path+".matchFields", i)
		op := framework.NodeSelectorOperator(r.Operator)
		if r.Key != "metadata.name" {
			p.addf(rp+".key", "unsupported field %q (want metadata.name)", r.Key)
		}
		if op != framework.NodeSelectorOpIn && op != framework.NodeSelectorOpNotIn {
			p.addf(rp+".operator", "unsupported operator %q for a field (want In or NotIn)", r.Operator)
		}
		if len(r.Values) != 1 {
			p.addf(rp+".values", "exactly one value is required, got %d", len(r.Values))
		}
		out.MatchFields = append(out.MatchFields, framework.NodeSelectorRequirement{Key: r.Key, Operator: op, Values: r.Values})
	}
	return out
}

func (p *problems) podTopologySpreadArgs(w *podTopologySpreadArgsV1, path string) *podtopologyspread.Args {
	out := &podtopologyspread.Args{DefaultingType: podtopologyspread.DefaultingType(w.DefaultingType)}
	dp := path + ".defaultingType"
	switch out.DefaultingType {
	case podtopologyspread.SystemDefaulting, "":
		if len(w.DefaultConstraints) > 0 {
			p.addf(dp, "must be List when defaultConstraints are given (System uses kube's built-in constraints)")
		}
	case podtopologyspread.ListDefaulting:
	default:
		p.addf(dp, "unknown defaulting type %q (want System or List)", w.DefaultingType)
	}
	cp := path + ".defaultConstraints"
	for i, c := range w.DefaultConstraints {
		ip := index(cp, i)
		if c.MaxSkew <= 0 {
			p.addf(ip+".maxSkew", "%d must be greater than 0", c.MaxSkew)
		}
		if c.TopologyKey == "" {
			p.addf(ip+".topologyKey", "required")
		}
		action := framework.UnsatisfiableConstraintAction(c.WhenUnsatisfiable)
		switch action {
		case framework.DoNotSchedule, framework.ScheduleAnyway:
		case "":
			p.addf(ip+".whenUnsatisfiable", "required (want DoNotSchedule or ScheduleAnyway)")
		default:
			p.addf(ip+".whenUnsatisfiable", "unknown action %q (want DoNotSchedule or ScheduleAnyway)", c.WhenUnsatisfiable)
		}
		if c.LabelSelector != nil {
			p.addf(ip+".labelSelector", "must not be set: default constraints select the pod's own labels")
		}
		if c.MinDomains != nil && *c.MinDomains <= 0 {
			p.addf(ip+".minDomains", "%d must be greater than 0", *c.MinDomains)
		}
		p.inclusionPolicy(c.NodeAffinityPolicy, ip+".nodeAffinityPolicy")
		p.inclusionPolicy(c.NodeTaintsPolicy, ip+".nodeTaintsPolicy")
		for j := range i {
			o := &w.DefaultConstraints[j]
			if o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable {
				p.addf(ip, "repeats {%s, %s} of %s", c.TopologyKey, c.WhenUnsatisfiable, index(cp, j))
				break
			}
		}
		out.DefaultConstraints = append(out.DefaultConstraints, framework.TopologySpreadConstraint{
			MaxSkew:            c.MaxSkew,
			TopologyKey:        c.TopologyKey,
			WhenUnsatisfiable:  action,
			MinDomains:         c.MinDomains,
			NodeAffinityPolicy: framework.NodeInclusionPolicy(c.NodeAffinityPolicy),
			NodeTaintsPolicy:   framework.NodeInclusionPolicy(c.NodeTaintsPolicy),
			MatchLabelKeys:     c.MatchLabelKeys,
		})
	}
	return out
}

func (p *problems) inclusionPolicy(v, path string) {
	switch framework.NodeInclusionPolicy(v) {
	case "", framework.NodeInclusionPolicyHonor, framework.NodeInclusionPolicyIgnore:
	default:
		p.addf(path, "unknown policy %q (want Honor or Ignore)", v)
	}
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
