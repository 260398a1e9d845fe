// Package conformance checks Berth's scheduling core against
// kube-scheduler's own plugins: random scenarios, made from a seed, run
// through both, and every node's verdict and scores must agree.
package conformance

import (
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Scenario is one scheduling question in Kubernetes' own types, so kube's
// plugins take it as is and Berth's side is a conversion away.
type Scenario struct {
	Seed uint64 `json:"seed"`
	// Profile indexes Profiles.
	Profile int        `json:"profile"`
	Nodes   []*v1.Node `json:"nodes"`
	// Pods are already placed (Spec.NodeName set).
	Pods []*v1.Pod `json:"pods,omitempty"`
	// Pod is the one being scheduled.
	Pod *v1.Pod `json:"pod"`
}

// Label keys and values are drawn from small pools so selectors, affinity
// and spreading often match something.
const (
	zoneKey     = "topology.kubernetes.io/zone"
	hostnameKey = "kubernetes.io/hostname"
	gpuResource = "example.com/gpu"
	fpgaRes     = "example.com/fpga"
)

var (
	zones       = []string{"zone-a", "zone-b", "zone-c"}
	namespaces  = []string{"default", "team-a"}
	apps        = []string{"web", "db", "cache"}
	images      = []string{"registry.io/web:v1", "registry.io/db:v2", "registry.io/cache:v3", "registry.io/big:v1", "registry.io/tiny"}
	imageSizes  = []int64{30 << 20, 300 << 20, 800 << 20, 2000 << 20, 5 << 20}
	taintKeys   = []string{"dedicated", "spot", "gpu"}
	taintValues = []string{"a", "b", ""}
	effects     = []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}
)

type gen struct{ r *rand.Rand }

func (g gen) pick(s []string) string  { return s[g.r.IntN(len(s))] }
func (g gen) chance(percent int) bool { return g.r.IntN(100) < percent }
func (g gen) between(lo, hi int) int  { return lo + g.r.IntN(hi-lo+1) }
func (g gen) milli(v int64) resource.Quantity {
	return *resource.NewMilliQuantity(v, resource.DecimalSI)
}
func (g gen) count(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.BinarySI) }

// Generate makes the scenario of a seed: 1 to 8 nodes, up to 3 pods on
// each, and a pod to place.
func Generate(seed uint64) *Scenario {
	g := gen{rand.New(rand.NewPCG(seed, seed^0x5bd1e995))}
	sc := &Scenario{Seed: seed, Profile: int(seed % uint64(len(Profiles)))}
	for i := range g.between(1, 8) {
		sc.Nodes = append(sc.Nodes, g.node(fmt.Sprintf("node-%d", i)))
	}
	for _, n := range sc.Nodes {
		for j := range g.between(0, 3) {
			p := g.pod(fmt.Sprintf("%s-pod-%d", n.Name, j), false)
			p.Spec.NodeName = n.Name
			sc.Pods = append(sc.Pods, p)
		}
	}
	sc.Pod = g.pod("incoming", true)
	// Start times come from a stream of their own so adding them left
	// every other draw of a seed as it was. Few distinct values make
	// preemption's last rule (latest start among the top victims) both
	// decide and tie. Every placed pod has one: kube reads a missing one
	// as the time of each call, which would make that rule a clock race.
	starts := rand.New(rand.NewPCG(seed, 0x57a27))
	for _, p := range sc.Pods {
		p.Status.StartTime = &metav1.Time{Time: startEpoch.Add(time.Duration(starts.IntN(3)) * time.Minute)}
	}
	return sc
}

// startEpoch is when the placed pods' start times begin, whole seconds so
// it survives a YAML round trip.
var startEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (g gen) node(name string) *v1.Node {
	alloc := v1.ResourceList{
		v1.ResourceCPU:    g.milli(int64(g.between(2, 16)) * 1000),
		v1.ResourceMemory: g.count(int64(g.between(4, 64)) << 30),
		v1.ResourcePods:   g.count(int64(g.between(3, 110))),
	}
	if g.chance(60) {
		alloc[v1.ResourceEphemeralStorage] = g.count(int64(g.between(1, 50)) << 30)
	}
	if g.chance(40) {
		alloc[gpuResource] = g.count(int64(g.between(0, 4)))
	}
	if g.chance(10) {
		alloc[fpgaRes] = g.count(1)
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostnameKey: name}},
		Status:     v1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
	if g.chance(85) {
		n.Labels[zoneKey] = g.pick(zones)
	}
	if g.chance(50) {
		n.Labels["disk"] = g.pick([]string{"ssd", "hdd"})
	}
	if g.chance(60) {
		n.Labels["tier"] = fmt.Sprint(g.between(1, 5))
	}
	for range g.between(0, 2) {
		if g.chance(25) {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: g.pick(taintKeys), Value: g.pick(taintValues), Effect: effects[g.r.IntN(len(effects))]})
		}
	}
	n.Spec.Unschedulable = g.chance(5)
	for i, img := range images {
		if g.chance(30) {
			n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{img}, SizeBytes: imageSizes[i]})
		}
	}
	return n
}

func (g gen) requests(incoming bool) v1.ResourceList {
	rl := v1.ResourceList{}
	if g.chance(80) {
		rl[v1.ResourceCPU] = g.milli(int64(g.between(1, 30)) * 100)
	}
	if g.chance(80) {
		rl[v1.ResourceMemory] = g.count(int64(g.between(1, 24)) << 28)
	}
	if g.chance(20) {
		rl[v1.ResourceEphemeralStorage] = g.count(int64(g.between(1, 20)) << 30)
	}
	if g.chance(10) {
		rl[gpuResource] = g.count(int64(g.between(1, 2)))
	}
	if incoming && g.chance(5) {
		rl[fpgaRes] = g.count(1)
	}
	return rl
}

func (g gen) container(name string, incoming bool) v1.Container {
	c := v1.Container{Name: name, Image: g.pick(images)}
	if rl := g.requests(incoming); len(rl) > 0 && g.chance(85) {
		c.Resources.Requests = rl
	}
	if g.chance(10) {
		c.Ports = append(c.Ports, v1.ContainerPort{
			ContainerPort: 80, HostPort: int32(8080 + g.between(0, 2)),
			Protocol: v1.Protocol(g.pick([]string{"TCP", "UDP", "TCP"})), HostIP: g.pick([]string{"", "", "127.0.0.1", "0.0.0.0"}),
		})
	}
	return c
}

func (g gen) pod(name string, incoming bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.pick(namespaces), UID: types.UID(fmt.Sprint("uid-", name, "-", g.r.Uint32())),
			Labels: map[string]string{"app": g.pick(apps)}},
		Spec: v1.PodSpec{SchedulerName: v1.DefaultSchedulerName},
	}
	if g.chance(50) {
		p.Labels["version"] = g.pick([]string{"v1", "v2"})
	}
	prio := int32(g.between(0, 3) * 100)
	p.Spec.Priority = &prio
	for i := range g.between(1, 2) {
		p.Spec.Containers = append(p.Spec.Containers, g.container(fmt.Sprint("c", i), incoming))
	}
	if g.chance(20) {
		init := g.container("init", incoming)
		init.Ports = nil
		p.Spec.InitContainers = append(p.Spec.InitContainers, init)
	}
	if g.chance(10) {
		p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: g.milli(int64(g.between(1, 5)) * 50), v1.ResourceMemory: g.count(64 << 20)}
	}
	if incoming {
		g.incomingConstraints(p)
	} else {
		p.Status.Phase = v1.PodRunning
		if g.chance(25) {
			p.Spec.Affinity = g.podAffinity(p, 30)
		}
	}
	return p
}

// incomingConstraints gives the pod to place its placement rules.
func (g gen) incomingConstraints(p *v1.Pod) {
	for range g.between(0, 3) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, g.toleration())
	}
	if g.chance(10) {
		p.Spec.NodeSelector = map[string]string{}
		if g.chance(50) {
			p.Spec.NodeSelector["disk"] = g.pick([]string{"ssd", "hdd"})
		} else {
			p.Spec.NodeSelector[zoneKey] = g.pick(zones)
		}
	}
	aff := &v1.Affinity{}
	if g.chance(30) {
		aff.NodeAffinity = g.nodeAffinity()
	}
	if g.chance(40) {
		pa := g.podAffinity(p, 50)
		aff.PodAffinity, aff.PodAntiAffinity = pa.PodAffinity, pa.PodAntiAffinity
	}
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		p.Spec.Affinity = aff
	}
	for range g.between(0, 2) {
		if g.chance(50) {
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, g.spread())
		}
	}
	if g.chance(10) {
		never := v1.PreemptNever
		p.Spec.PreemptionPolicy = &never
	}
}

func (g gen) toleration() v1.Toleration {
	t := v1.Toleration{Key: g.pick(taintKeys), Operator: v1.TolerationOpEqual, Value: g.pick(taintValues)}
	switch g.r.IntN(4) {
	case 0:
		t.Operator, t.Value = v1.TolerationOpExists, ""
	case 1:
		t = v1.Toleration{Operator: v1.TolerationOpExists} // tolerates every taint
	}
	if g.chance(60) {
		t.Effect = effects[g.r.IntN(len(effects))]
	}
	if t.Effect == v1.TaintEffectNoExecute && g.chance(50) {
		secs := int64(60)
		t.TolerationSeconds = &secs
	}
	return t
}

func (g gen) requirement() v1.NodeSelectorRequirement {
	switch g.r.IntN(6) {
	case 0:
		return v1.NodeSelectorRequirement{Key: zoneKey, Operator: v1.NodeSelectorOpIn, Values: []string{g.pick(zones), g.pick(zones)}}
	case 1:
		return v1.NodeSelectorRequirement{Key: zoneKey, Operator: v1.NodeSelectorOpNotIn, Values: []string{g.pick(zones)}}
	case 2:
		return v1.NodeSelectorRequirement{Key: "disk", Operator: v1.NodeSelectorOpExists}
	case 3:
		return v1.NodeSelectorRequirement{Key: "disk", Operator: v1.NodeSelectorOpDoesNotExist}
	case 4:
		return v1.NodeSelectorRequirement{Key: "tier", Operator: v1.NodeSelectorOpGt, Values: []string{fmt.Sprint(g.between(0, 4))}}
	default:
		return v1.NodeSelectorRequirement{Key: "tier", Operator: v1.NodeSelectorOpLt, Values: []string{fmt.Sprint(g.between(2, 6))}}
	}
}

func (g gen) term() v1.NodeSelectorTerm {
	var t v1.NodeSelectorTerm
	for range g.between(1, 2) {
		t.MatchExpressions = append(t.MatchExpressions, g.requirement())
	}
	if g.chance(15) {
		op := v1.NodeSelectorOpIn
		if g.chance(30) {
			op = v1.NodeSelectorOpNotIn
		}
		t.MatchFields = []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: op, Values: []string{fmt.Sprintf("node-%d", g.between(0, 7))}}}
	}
	return t
}

func (g gen) nodeAffinity() *v1.NodeAffinity {
	na := &v1.NodeAffinity{}
	if g.chance(40) {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
		for range g.between(1, 3) {
			na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, g.term())
		}
	}
	for range g.between(0, 2) {
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			v1.PreferredSchedulingTerm{Weight: int32(g.between(1, 100)), Preference: g.term()})
	}
	return na
}

func (g gen) labelSelector() *metav1.LabelSelector {
	switch g.r.IntN(4) {
	case 0:
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick(apps)}}
	case 1:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{g.pick(apps), g.pick(apps)}}}}
	case 2:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "version", Operator: metav1.LabelSelectorOpExists}}}
	default:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{g.pick(apps)}}}}
	}
}

func (g gen) affinityTerm() v1.PodAffinityTerm {
	t := v1.PodAffinityTerm{LabelSelector: g.labelSelector(), TopologyKey: g.pick([]string{zoneKey, hostnameKey})}
	switch g.r.IntN(4) {
	case 0:
		t.Namespaces = []string{g.pick(namespaces)}
	case 1:
		t.NamespaceSelector = &metav1.LabelSelector{} // every namespace
	}
	if g.chance(15) {
		t.MatchLabelKeys = []string{"version"}
	} else if g.chance(10) {
		t.MismatchLabelKeys = []string{"version"}
	}
	return t
}

// podAffinity draws affinity and anti-affinity terms, each kind present
// with the given chance.
func (g gen) podAffinity(_ *v1.Pod, percent int) *v1.Affinity {
	aff := &v1.Affinity{}
	if g.chance(percent) {
		aff.PodAffinity = &v1.PodAffinity{}
		if g.chance(50) {
			aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = []v1.PodAffinityTerm{g.affinityTerm()}
		}
		for range g.between(0, 2) {
			aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				v1.WeightedPodAffinityTerm{Weight: int32(g.between(1, 100)), PodAffinityTerm: g.affinityTerm()})
		}
	}
	if g.chance(percent) {
		aff.PodAntiAffinity = &v1.PodAntiAffinity{}
		if g.chance(50) {
			aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = []v1.PodAffinityTerm{g.affinityTerm()}
		}
		for range g.between(0, 2) {
			aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				v1.WeightedPodAffinityTerm{Weight: int32(g.between(1, 100)), PodAffinityTerm: g.affinityTerm()})
		}
	}
	return aff
}

func (g gen) spread() v1.TopologySpreadConstraint {
	c := v1.TopologySpreadConstraint{
		MaxSkew: int32(g.between(1, 2)), TopologyKey: g.pick([]string{zoneKey, hostnameKey}),
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: g.labelSelector(),
	}
	if g.chance(40) {
		c.WhenUnsatisfiable = v1.ScheduleAnyway
	} else if g.chance(30) {
		md := int32(g.between(1, 4))
		c.MinDomains = &md
	}
	honor, ignore := v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore
	switch g.r.IntN(3) {
	case 0:
		c.NodeAffinityPolicy = &honor
	case 1:
		c.NodeAffinityPolicy = &ignore
	}
	switch g.r.IntN(3) {
	case 0:
		c.NodeTaintsPolicy = &honor
	case 1:
		c.NodeTaintsPolicy = &ignore
	}
	if g.chance(20) {
		c.MatchLabelKeys = []string{"version"}
	}
	return c
}
