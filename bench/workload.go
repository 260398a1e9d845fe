package bench

import (
	"fmt"
	"strings"

	"github.com/berth-io/berth/bench/trace"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Workload names, in the order --workload all runs them. Each mirrors a
// scheduler_perf workload of Kubernetes (test/integration/scheduler_perf).
const (
	WorkloadBasic             = "basic"
	WorkloadNodeAffinity      = "node-affinity"
	WorkloadTopologySpreading = "topology-spreading"
	WorkloadPodAntiAffinity   = "pod-anti-affinity"
	WorkloadPreferredAffinity = "preferred-affinity"
	WorkloadPreemption        = "preemption"
	WorkloadAlibaba           = "alibaba"
	WorkloadAll               = "all"
)

func WorkloadNames() []string {
	return []string{
		WorkloadBasic, WorkloadNodeAffinity, WorkloadTopologySpreading, WorkloadPodAntiAffinity,
		WorkloadPreferredAffinity, WorkloadPreemption, WorkloadAlibaba,
	}
}

// Labels and namespaces every workload's nodes and pods use.
const (
	labelHostname = "kubernetes.io/hostname"
	labelZone     = "topology.kubernetes.io/zone"
	benchZones    = 10
	// Measured and init pods live in separate namespaces, as scheduler_perf
	// puts them in sched-1 and sched-0; affinity terms name both.
	measuredNamespace = "bench"
	initNamespace     = "bench-init"
)

// podPhase says which step of a workload a pod belongs to.
type podPhase int

const (
	phaseInit     podPhase = iota // bound before measuring, not counted
	phaseMeasured                 // counted in throughput and latency
	numPhases
)

// workload is one scenario: a node template, pods bound before the
// measured phase (init), and the measured pods. A trace workload replays
// its trace instead of init and measured pods.
type workload struct {
	name     string
	nodes    int
	initPods int
	pods     int
	node     func(i int) *berthv1.Node
	initPod  func(i int) *berthv1.Pod
	pod      func(i int) *berthv1.Pod
	// check inspects the final placements for violations of the workload's
	// hard constraints, which a race between shards could cause.
	check func(ps []placement) []string
	// expectEvictions: the measured pods can only bind by preempting.
	expectEvictions bool
	trace           *trace.Trace
	// notes are printed before the run: what the workload simplifies.
	notes []string
}

// placement is where one pod of a run ended up; node is an index into the
// workload's nodes, -1 when the pod is not bound.
type placement struct {
	phase podPhase
	node  int
}

// Sizes are the --nodes, --init-pods and --pods overrides; 0 (-1
// for InitPods) keeps the workload's default.
type Sizes struct {
	Nodes, InitPods, Pods int
}

// nodesOr is the --nodes override, or def.
func (s Sizes) nodesOr(def int) int {
	if s.Nodes > 0 {
		return s.Nodes
	}
	return def
}

// resolve fills each size not overridden from the defaults given.
func (s Sizes) resolve(nodes, initPods, pods int) Sizes {
	nodes = s.nodesOr(nodes)
	if s.InitPods >= 0 {
		initPods = s.InitPods
	}
	if s.Pods > 0 {
		pods = s.Pods
	}
	return Sizes{Nodes: nodes, InitPods: initPods, Pods: pods}
}

// Shape is the resources of the node and pod templates: cpu in millicores,
// memory in bytes. Zero fields of an override keep the workload's own.
type Shape struct {
	NodeCPU, NodeMemory, PodCPU, PodMemory int64
}

func (s Shape) with(override Shape) Shape {
	if override.NodeCPU > 0 {
		s.NodeCPU = override.NodeCPU
	}
	if override.NodeMemory > 0 {
		s.NodeMemory = override.NodeMemory
	}
	if override.PodCPU > 0 {
		s.PodCPU = override.PodCPU
	}
	if override.PodMemory > 0 {
		s.PodMemory = override.PodMemory
	}
	return s
}

var (
	// basicShape is what berth bench always used: big nodes, small pods.
	basicShape = Shape{NodeCPU: 32000, NodeMemory: 128 << 30, PodCPU: 100, PodMemory: 256 << 20}
	// perfShape is scheduler_perf's node-default and pod-default templates.
	perfShape = Shape{NodeCPU: 4000, NodeMemory: 32 << 30, PodCPU: 100, PodMemory: 500 << 20}
)

// Preemption sizes, from scheduler_perf's PreemptionBasic: 900m low
// priority pods fill a 4-core node four deep, and a 3-core preemptor needs
// three of them gone.
const (
	preemptionVictimCPU     = 900
	preemptionPreemptorCPU  = 3000
	preemptionVictimsToFill = 4
	preemptionLowPriority   = 1
	preemptionHighPriority  = 100
)

// nodeAffinityZones are the zones node-affinity pods require.
var nodeAffinityZones = []string{zoneName(0), zoneName(1)}

// template builds a run's nodes and pods. Names carry the run id so runs
// against one long-lived server do not collide.
type template struct {
	run   string
	shape Shape
}

func zoneName(i int) string { return fmt.Sprintf("zone-%d", i) }

// nodeZone is the zone template.node gives node i.
func nodeZone(i int) int { return i % benchZones }

func (t template) nodeName(i int) string { return fmt.Sprintf("%s-node-%05d", t.run, i) }

func (t template) node(i int) *berthv1.Node {
	name := t.nodeName(i)
	return &berthv1.Node{
		Name: name,
		Allocatable: map[string]int64{
			"cpu": t.shape.NodeCPU, "memory": t.shape.NodeMemory, "pods": 110, "ephemeral-storage": 100 << 30,
		},
		Labels: map[string]string{labelHostname: name, labelZone: zoneName(nodeZone(i))},
	}
}

// appLabel is the label every pod of the run carries, and the one their
// affinity and spreading selectors match.
func (t template) appLabel() map[string]string { return map[string]string{"app": t.run} }

// pod is a pod with one container and the template's requests; init pods
// go to initNamespace with distinct names.
func (t template) pod(phase podPhase, i int) *berthv1.Pod {
	ns, name := measuredNamespace, fmt.Sprintf("%s-%d", t.run, i)
	if phase == phaseInit {
		ns, name = initNamespace, fmt.Sprintf("%s-init-%d", t.run, i)
	}
	return &berthv1.Pod{
		Namespace: ns, Name: name,
		Labels: t.appLabel(),
		Containers: []*berthv1.Container{{
			Name: "main", Image: "registry.example/app:1",
			Requests: map[string]int64{"cpu": t.shape.PodCPU, "memory": t.shape.PodMemory},
		}},
	}
}

// affinityTerm selects the run's pods in both namespaces, on one node.
func (t template) affinityTerm() *berthv1.PodAffinityTerm {
	return &berthv1.PodAffinityTerm{
		LabelSelector: &berthv1.LabelSelector{MatchLabels: t.appLabel()},
		Namespaces:    []string{initNamespace, measuredNamespace},
		TopologyKey:   labelHostname,
	}
}

// newWorkload builds the named workload for one run.
func newWorkload(name, run string, sizes Sizes, override Shape, tr *trace.Trace) (*workload, error) {
	t := template{run: run, shape: perfShape.with(override)}
	w := &workload{name: name}
	// Default sizes follow scheduler_perf's 5000Nodes workloads, scaled
	// with --nodes where they depend on it.
	n := sizes.nodesOr(5000)
	var s Sizes
	switch name {
	case WorkloadBasic:
		t.shape = basicShape.with(override)
		s = sizes.resolve(n, 0, 10000)
		t.pods(w, nil, nil)

	case WorkloadNodeAffinity:
		// SchedulingNodeAffinity: init and measured pods alike require two
		// of the ten zones.
		s = sizes.resolve(n, n, 1000)
		t.pods(w, requireAffinityZones, requireAffinityZones)
		w.check = checkNodeAffinity

	case WorkloadTopologySpreading:
		// TopologySpreading: default init pods, then measured pods that
		// must stay within a skew of one across zones.
		s = sizes.resolve(n, n, 2000)
		t.pods(w, t.labelInit, t.spreadOverZones)
		w.check = checkZoneSkew

	case WorkloadPodAntiAffinity:
		// SchedulingPodAntiAffinity: every pod, init or measured, repels
		// every other from its node, so each needs a node of its own.
		s = sizes.resolve(n, n/5, n/5)
		if s.InitPods+s.Pods > s.Nodes {
			return nil, fmt.Errorf("%s: init pods + pods (%d) must not exceed nodes (%d): one pod per node", name, s.InitPods+s.Pods, s.Nodes)
		}
		t.pods(w, t.repelOthers, t.repelOthers)
		w.check = checkOnePerNode

	case WorkloadPreferredAffinity:
		// SchedulingPreferredPodAffinity: pods prefer nodes that already run
		// pods of the run.
		s = sizes.resolve(n, n, 1000)
		t.pods(w, t.preferOthers, t.preferOthers)

	case WorkloadPreemption:
		// PreemptionBasic: low priority init pods fill every node exactly;
		// each high priority pod then has to evict three of them. The
		// shapes are fixed: resource overrides would break the fill. The
		// default is scheduler_perf's 500 nodes (its 5000-node variant is
		// disabled there); --nodes 5000 gives 20000 victims.
		t.shape = perfShape
		n = sizes.nodesOr(500)
		s = sizes.resolve(n, preemptionVictimsToFill*n, n)
		if s.Pods > s.Nodes {
			return nil, fmt.Errorf("%s: pods (%d) must not exceed nodes (%d): one preemptor fits per node", name, s.Pods, s.Nodes)
		}
		t.pods(w, makeVictim, makePreemptor)
		w.expectEvictions = true
		if s.InitPods < preemptionVictimsToFill*s.Nodes {
			w.notes = append(w.notes, fmt.Sprintf("%d init pods leave room on some nodes: fewer preemptions are needed", s.InitPods))
		}

	case WorkloadAlibaba:
		if tr == nil {
			return nil, fmt.Errorf("%s: no trace loaded", name)
		}
		s = w.replay(run, tr)

	default:
		return nil, fmt.Errorf("unknown workload %q (one of %s, %s)", name, strings.Join(WorkloadNames(), ", "), WorkloadAll)
	}
	if s.Nodes < 1 || s.Pods < 1 || s.InitPods < 0 {
		return nil, fmt.Errorf("%s: needs at least one node and one pod", name)
	}
	if w.node == nil {
		w.node = t.node // after the switch: a method value copies t
	}
	w.nodes, w.initPods, w.pods = s.Nodes, s.InitPods, s.Pods
	return w, nil
}

// replay makes w a replay of tr, whose sizes it returns.
func (w *workload) replay(run string, tr *trace.Trace) Sizes {
	w.node = func(i int) *berthv1.Node { return traceNodeToWire(run, i, tr.Nodes[i]) }
	w.trace = tr
	w.notes = append(w.notes, traceNotes(tr)...)
	return Sizes{Nodes: len(tr.Nodes), Pods: len(tr.Pods)}
}

// pods sets w's init and measured pods: the template's, each changed by
// its edit (nil: none). t is copied: later changes to it do not reach them.
func (t template) pods(w *workload, editInit, editMeasured func(*berthv1.Pod)) {
	build := func(phase podPhase, edit func(*berthv1.Pod)) func(int) *berthv1.Pod {
		return func(i int) *berthv1.Pod {
			p := t.pod(phase, i)
			if edit != nil {
				edit(p)
			}
			return p
		}
	}
	w.initPod, w.pod = build(phaseInit, editInit), build(phaseMeasured, editMeasured)
}

// The edits of the workloads' pods.

func requireAffinityZones(p *berthv1.Pod) {
	p.Affinity = &berthv1.Affinity{NodeAffinity: &berthv1.NodeAffinity{
		Required: &berthv1.NodeSelector{NodeSelectorTerms: []*berthv1.NodeSelectorTerm{{
			MatchExpressions: []*berthv1.NodeSelectorRequirement{{
				Key: labelZone, Operator: berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_IN,
				Values: nodeAffinityZones,
			}},
		}}},
	}}
}

// labelInit gives init pods a label of their own, so the measured pods'
// spreading does not count them.
func (t template) labelInit(p *berthv1.Pod) {
	p.Labels = map[string]string{"app": t.run + "-init"}
}

func (t template) spreadOverZones(p *berthv1.Pod) {
	p.TopologySpreadConstraints = []*berthv1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: labelZone,
		WhenUnsatisfiable: berthv1.UnsatisfiableConstraintAction_UNSATISFIABLE_CONSTRAINT_ACTION_DO_NOT_SCHEDULE,
		LabelSelector:     &berthv1.LabelSelector{MatchLabels: t.appLabel()},
	}}
}

func (t template) repelOthers(p *berthv1.Pod) {
	p.Affinity = &berthv1.Affinity{PodAntiAffinity: &berthv1.PodAntiAffinity{
		Required: []*berthv1.PodAffinityTerm{t.affinityTerm()},
	}}
}

func (t template) preferOthers(p *berthv1.Pod) {
	p.Affinity = &berthv1.Affinity{PodAffinity: &berthv1.PodAffinity{
		Preferred: []*berthv1.WeightedPodAffinityTerm{{Weight: 100, Term: t.affinityTerm()}},
	}}
}

func makeVictim(p *berthv1.Pod) {
	p.Priority = preemptionLowPriority
	p.Containers[0].Requests["cpu"] = preemptionVictimCPU
}

func makePreemptor(p *berthv1.Pod) {
	p.Priority = preemptionHighPriority
	p.PreemptionPolicy = berthv1.PreemptionPolicy_PREEMPTION_POLICY_PREEMPT_LOWER_PRIORITY
	p.Containers[0].Requests["cpu"] = preemptionPreemptorCPU
}

// traceNodeToWire makes node i of a trace: its capacity as allocatable,
// GPUs as the extended resource trace.GPUResource, and the GPU model as a
// label. Zones are dealt round robin like the other workloads'.
func traceNodeToWire(run string, i int, n trace.Node) *berthv1.Node {
	name := run + "-" + n.Name
	alloc := map[string]int64{
		"cpu": n.CPUMilli, "memory": n.MemoryMiB << 20, "pods": 110, "ephemeral-storage": 100 << 30,
	}
	labels := map[string]string{labelHostname: name, labelZone: zoneName(nodeZone(i))}
	if n.GPUs > 0 {
		alloc[trace.GPUResource] = n.GPUs
	}
	if n.Model != "" {
		labels[trace.ModelLabel] = n.Model
	}
	return &berthv1.Node{Name: name, Allocatable: alloc, Labels: labels}
}

// tracePodToWire makes a trace pod: one container with its cpu and memory
// requests, and its GPU count as trace.GPUResource when it has any.
func tracePodToWire(run string, p trace.Pod) *berthv1.Pod {
	req := map[string]int64{"cpu": p.CPUMilli, "memory": p.MemoryMiB << 20}
	if p.GPUs > 0 {
		req[trace.GPUResource] = p.GPUs
	}
	return &berthv1.Pod{
		Namespace: measuredNamespace, Name: run + "-" + p.Name,
		Labels:     map[string]string{"app": run},
		Containers: []*berthv1.Container{{Name: "main", Image: "registry.example/trace:1", Requests: req}},
	}
}

// traceNotes says what the replay simplifies.
func traceNotes(tr *trace.Trace) []string {
	var sharing int
	for _, p := range tr.Pods {
		if p.GPUs == 1 && p.GPUMilli > 0 && p.GPUMilli < 1000 {
			sharing++
		}
	}
	return []string{
		fmt.Sprintf("trace: %d nodes, %d pods, %d events (creations and deletions in trace order, time compressed)",
			len(tr.Nodes), len(tr.Pods), len(tr.Events)),
		fmt.Sprintf("trace: %d GPU-sharing pods (gpu_milli < 1000) are replayed as one whole %s each", sharing, trace.GPUResource),
	}
}

// Checks of the final placements. Each returns at most a few descriptions.

const maxViolations = 5

func checkNodeAffinity(ps []placement) []string {
	var out []string
	for i, p := range ps {
		if p.node < 0 {
			continue
		}
		if z := nodeZone(p.node); z > 1 && len(out) < maxViolations {
			out = append(out, fmt.Sprintf("pod %d on a node of %s, outside %v", i, zoneName(z), nodeAffinityZones))
		}
	}
	return out
}

// checkZoneSkew: placing each pod with a skew of at most one keeps the
// final counts within one of each other, since the minimum never falls.
func checkZoneSkew(ps []placement) []string {
	var counts [benchZones]int
	for _, p := range ps {
		if p.phase == phaseMeasured && p.node >= 0 {
			counts[nodeZone(p.node)]++
		}
	}
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi-lo > 1 {
		return []string{fmt.Sprintf("zone skew %d > 1: pods per zone %v", hi-lo, counts)}
	}
	return nil
}

func checkOnePerNode(ps []placement) []string {
	seen := map[int]int{}
	var out []string
	for i, p := range ps {
		if p.node < 0 {
			continue
		}
		if j, dup := seen[p.node]; dup && len(out) < maxViolations {
			out = append(out, fmt.Sprintf("pods %d and %d share node %d", j, i, p.node))
		}
		seen[p.node] = i
	}
	return out
}
