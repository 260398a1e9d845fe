package conformance

import (
	v1 "k8s.io/api/core/v1"
)

// Shrink returns a smaller scenario that still fails check: it drops
// nodes (with their pods), placed pods and the incoming pod's rules one at
// a time, keeping each removal after which check still fails, until none
// can go.
func Shrink(sc *Scenario, check func(*Scenario) bool) *Scenario {
	for changed := true; changed; {
		changed = false
		for _, cand := range candidates(sc) {
			if check(cand) {
				sc, changed = cand, true
				break
			}
		}
	}
	return sc
}

// candidates are the scenarios one removal smaller than sc.
func candidates(sc *Scenario) []*Scenario {
	var out []*Scenario
	for i := range sc.Nodes {
		if len(sc.Nodes) == 1 {
			break
		}
		c := clone(sc)
		gone := c.Nodes[i].Name
		c.Nodes = append(c.Nodes[:i], c.Nodes[i+1:]...)
		c.Pods = nil
		for _, p := range sc.Pods {
			if p.Spec.NodeName != gone {
				c.Pods = append(c.Pods, p)
			}
		}
		out = append(out, c)
	}
	for i := range sc.Pods {
		c := clone(sc)
		c.Pods = append(c.Pods[:i], c.Pods[i+1:]...)
		out = append(out, c)
	}
	for _, drop := range podRuleRemovals(sc.Pod) {
		c := clone(sc)
		c.Pod = sc.Pod.DeepCopy()
		drop(c.Pod)
		out = append(out, c)
	}
	return out
}

func clone(sc *Scenario) *Scenario {
	c := *sc
	c.Nodes = append([]*v1.Node(nil), sc.Nodes...)
	c.Pods = append([]*v1.Pod(nil), sc.Pods...)
	return &c
}

// podRuleRemovals are the ways to take one rule off the incoming pod.
func podRuleRemovals(p *v1.Pod) []func(*v1.Pod) {
	var out []func(*v1.Pod)
	for i := range p.Spec.Tolerations {
		out = append(out, func(p *v1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations[:i], p.Spec.Tolerations[i+1:]...) })
	}
	for i := range p.Spec.TopologySpreadConstraints {
		out = append(out, func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints[:i], p.Spec.TopologySpreadConstraints[i+1:]...)
		})
	}
	if p.Spec.NodeSelector != nil {
		out = append(out, func(p *v1.Pod) { p.Spec.NodeSelector = nil })
	}
	if a := p.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil {
			out = append(out, func(p *v1.Pod) { p.Spec.Affinity.NodeAffinity = nil })
		}
		if a.PodAffinity != nil {
			out = append(out, func(p *v1.Pod) { p.Spec.Affinity.PodAffinity = nil })
		}
		if a.PodAntiAffinity != nil {
			out = append(out, func(p *v1.Pod) { p.Spec.Affinity.PodAntiAffinity = nil })
		}
	}
	if len(p.Spec.InitContainers) > 0 {
		out = append(out, func(p *v1.Pod) { p.Spec.InitContainers = nil })
	}
	if p.Spec.Overhead != nil {
		out = append(out, func(p *v1.Pod) { p.Spec.Overhead = nil })
	}
	if len(p.Spec.Containers) > 1 {
		out = append(out, func(p *v1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] })
	}
	return out
}
