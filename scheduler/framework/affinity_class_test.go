package framework

import "testing"

// Pods share an affinity class exactly when namespace, labels and
// inter-pod terms are equal; names, node affinity and the rest do not
// count.
func TestAffinityClass(t *testing.T) {
	term := func() PodAffinityTerm {
		return PodAffinityTerm{
			LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"},
				MatchExpressions: []LabelSelectorRequirement{{Key: "env", Operator: LabelSelectorOpIn, Values: []string{"a", "b"}}}},
			Namespaces: []string{"ns1"}, TopologyKey: LabelHostname, MatchLabelKeys: []string{"rev"},
		}
	}
	base := func() *Pod {
		return &Pod{Namespace: "ns", Name: "a", UID: "a", Labels: map[string]string{"app": "web", "rev": "1"},
			Affinity: &Affinity{
				PodAffinity:     &PodAffinity{Preferred: []WeightedPodAffinityTerm{{Weight: 10, Term: term()}}},
				PodAntiAffinity: &PodAntiAffinity{Required: []PodAffinityTerm{term()}},
			}}
	}
	same := []func(p *Pod){
		func(p *Pod) { p.Name, p.UID, p.NodeName, p.Priority = "b", "b", "n1", 7 },
		func(p *Pod) {
			p.Affinity.NodeAffinity = &NodeAffinity{}
		},
	}
	different := map[string]func(p *Pod){
		"namespace":   func(p *Pod) { p.Namespace = "other" },
		"label value": func(p *Pod) { p.Labels["rev"] = "2" },
		"label added": func(p *Pod) { p.Labels["x"] = "" },
		"no affinity": func(p *Pod) { p.Affinity = nil },
		"weight":      func(p *Pod) { p.Affinity.PodAffinity.Preferred[0].Weight = 11 },
		"preferred becomes anti": func(p *Pod) {
			p.Affinity.PodAffinity, p.Affinity.PodAntiAffinity.Preferred = nil, p.Affinity.PodAffinity.Preferred
		},
		"selector label": func(p *Pod) { p.Affinity.PodAntiAffinity.Required[0].LabelSelector.MatchLabels["tier"] = "back" },
		"expression values": func(p *Pod) {
			p.Affinity.PodAntiAffinity.Required[0].LabelSelector.MatchExpressions[0].Values = []string{"a"}
		},
		"nil selector":     func(p *Pod) { p.Affinity.PodAntiAffinity.Required[0].LabelSelector = nil },
		"term namespaces":  func(p *Pod) { p.Affinity.PodAntiAffinity.Required[0].Namespaces = nil },
		"all namespaces":   func(p *Pod) { p.Affinity.PodAntiAffinity.Required[0].AllNamespaces = true },
		"topology key":     func(p *Pod) { p.Affinity.PodAntiAffinity.Required[0].TopologyKey = LabelTopologyZone },
		"match label keys": func(p *Pod) { p.Affinity.PodAntiAffinity.Required[0].MatchLabelKeys = nil },
		"mismatch label keys": func(p *Pod) {
			p.Affinity.PodAntiAffinity.Required[0].MismatchLabelKeys = []string{"rev"}
		},
		// Lengths are encoded: moving a character across a boundary shows.
		"string boundaries": func(p *Pod) { p.Namespace, p.Labels = "n", map[string]string{"sapp": "web", "rev": "1"} },
	}
	want := NewPodInfo(base()).AffinityClass()
	if again := NewPodInfo(base()).AffinityClass(); again != want {
		t.Fatalf("equal pods in classes %d and %d", want, again)
	}
	for i, change := range same {
		p := base()
		change(p)
		if got := NewPodInfo(p).AffinityClass(); got != want {
			t.Errorf("change %d should not count, yet class %d, want %d", i, got, want)
		}
	}
	for name, change := range different {
		p := base()
		change(p)
		if got := NewPodInfo(p).AffinityClass(); got == want {
			t.Errorf("%s: pods that affinity tells apart share class %d", name, got)
		}
	}
	// A PodInfo built without NewPodInfo still answers, uncached.
	if got := (&PodInfo{Pod: base()}).AffinityClass(); got != want {
		t.Errorf("literal PodInfo: class %d, want %d", got, want)
	}
}
