package bench

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/berth-io/berth/bench/trace"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

var defaultSizes = Sizes{InitPods: -1}

// basePod is what template.pod builds for run "r" with perfShape.
func basePod(phase podPhase, i int, cpu, memory int64) *berthv1.Pod {
	ns, name := measuredNamespace, "r-"+strconv.Itoa(i)
	if phase == phaseInit {
		ns, name = initNamespace, "r-init-"+strconv.Itoa(i)
	}
	return &berthv1.Pod{
		Namespace: ns, Name: name, Labels: map[string]string{"app": "r"},
		Containers: []*berthv1.Container{{
			Name: "main", Image: "registry.example/app:1",
			Requests: map[string]int64{"cpu": cpu, "memory": memory},
		}},
	}
}

func podWith(p *berthv1.Pod, edit func(*berthv1.Pod)) *berthv1.Pod {
	p = proto.Clone(p).(*berthv1.Pod)
	edit(p)
	return p
}

func runTerm() *berthv1.PodAffinityTerm {
	return &berthv1.PodAffinityTerm{
		LabelSelector: &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "r"}},
		Namespaces:    []string{initNamespace, measuredNamespace},
		TopologyKey:   labelHostname,
	}
}

// TestWorkloadPods is long because its table spells out, field by field,
// the pods every workload must build: the expectations, not logic.
func TestWorkloadPods(t *testing.T) {
	const mem = 500 << 20
	nodeAffinity := func(p *berthv1.Pod) {
		p.Affinity = &berthv1.Affinity{NodeAffinity: &berthv1.NodeAffinity{
			Required: &berthv1.NodeSelector{NodeSelectorTerms: []*berthv1.NodeSelectorTerm{{
				MatchExpressions: []*berthv1.NodeSelectorRequirement{{
					Key: labelZone, Operator: berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_IN,
					Values: []string{"zone-0", "zone-1"},
				}},
			}}},
		}}
	}
	antiAffinity := func(p *berthv1.Pod) {
		p.Affinity = &berthv1.Affinity{PodAntiAffinity: &berthv1.PodAntiAffinity{Required: []*berthv1.PodAffinityTerm{runTerm()}}}
	}
	preferred := func(p *berthv1.Pod) {
		p.Affinity = &berthv1.Affinity{PodAffinity: &berthv1.PodAffinity{
			Preferred: []*berthv1.WeightedPodAffinityTerm{{Weight: 100, Term: runTerm()}},
		}}
	}
	tests := []struct {
		workload             string
		wantInit, wantPod    *berthv1.Pod
		wantNodeCPU, wantMem int64
	}{
		{
			workload: WorkloadBasic,
			wantInit: basePod(phaseInit, 3, 100, 256<<20),
			wantPod:  basePod(phaseMeasured, 3, 100, 256<<20),
			// berth bench's original shape.
			wantNodeCPU: 32000, wantMem: 128 << 30,
		},
		{
			workload:    WorkloadNodeAffinity,
			wantInit:    podWith(basePod(phaseInit, 3, 100, mem), nodeAffinity),
			wantPod:     podWith(basePod(phaseMeasured, 3, 100, mem), nodeAffinity),
			wantNodeCPU: 4000, wantMem: 32 << 30,
		},
		{
			workload: WorkloadTopologySpreading,
			// Init pods are plain and outside the selector.
			wantInit: podWith(basePod(phaseInit, 3, 100, mem), func(p *berthv1.Pod) { p.Labels = map[string]string{"app": "r-init"} }),
			wantPod: podWith(basePod(phaseMeasured, 3, 100, mem), func(p *berthv1.Pod) {
				p.TopologySpreadConstraints = []*berthv1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: labelZone,
					WhenUnsatisfiable: berthv1.UnsatisfiableConstraintAction_UNSATISFIABLE_CONSTRAINT_ACTION_DO_NOT_SCHEDULE,
					LabelSelector:     &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "r"}},
				}}
			}),
			wantNodeCPU: 4000, wantMem: 32 << 30,
		},
		{
			workload:    WorkloadPodAntiAffinity,
			wantInit:    podWith(basePod(phaseInit, 3, 100, mem), antiAffinity),
			wantPod:     podWith(basePod(phaseMeasured, 3, 100, mem), antiAffinity),
			wantNodeCPU: 4000, wantMem: 32 << 30,
		},
		{
			workload:    WorkloadPreferredAffinity,
			wantInit:    podWith(basePod(phaseInit, 3, 100, mem), preferred),
			wantPod:     podWith(basePod(phaseMeasured, 3, 100, mem), preferred),
			wantNodeCPU: 4000, wantMem: 32 << 30,
		},
		{
			workload: WorkloadPreemption,
			wantInit: podWith(basePod(phaseInit, 3, 900, mem), func(p *berthv1.Pod) { p.Priority = 1 }),
			wantPod: podWith(basePod(phaseMeasured, 3, 3000, mem), func(p *berthv1.Pod) {
				p.Priority = 100
				p.PreemptionPolicy = berthv1.PreemptionPolicy_PREEMPTION_POLICY_PREEMPT_LOWER_PRIORITY
			}),
			wantNodeCPU: 4000, wantMem: 32 << 30,
		},
	}
	for _, tt := range tests {
		t.Run(tt.workload, func(t *testing.T) {
			w, err := newWorkload(tt.workload, "r", defaultSizes, Shape{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantInit, w.initPod(3), protocmp.Transform()); diff != "" {
				t.Errorf("init pod (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPod, w.pod(3), protocmp.Transform()); diff != "" {
				t.Errorf("measured pod (-want,+got):\n%s", diff)
			}
			wantNode := &berthv1.Node{
				Name: "r-node-00013",
				Allocatable: map[string]int64{
					"cpu": tt.wantNodeCPU, "memory": tt.wantMem, "pods": 110, "ephemeral-storage": 100 << 30,
				},
				Labels: map[string]string{labelHostname: "r-node-00013", labelZone: "zone-3"},
			}
			if diff := cmp.Diff(wantNode, w.node(13), protocmp.Transform()); diff != "" {
				t.Errorf("node (-want,+got):\n%s", diff)
			}
			// Builders hand out fresh objects: the submitter may send one
			// while the next is built.
			if w.pod(1) == w.pod(1) || w.pod(1).Containers[0] == w.pod(2).Containers[0] {
				t.Error("pods share objects")
			}
		})
	}
}

func TestWorkloadSizes(t *testing.T) {
	type sizes struct{ Nodes, Init, Pods int }
	tests := []struct {
		workload string
		flags    Sizes
		want     sizes
		wantErr  string
	}{
		{workload: WorkloadBasic, flags: defaultSizes, want: sizes{5000, 0, 10000}},
		{workload: WorkloadBasic, flags: Sizes{Nodes: 20, InitPods: -1, Pods: 200}, want: sizes{20, 0, 200}},
		{workload: WorkloadNodeAffinity, flags: defaultSizes, want: sizes{5000, 5000, 1000}},
		{workload: WorkloadNodeAffinity, flags: Sizes{Nodes: 500, InitPods: -1}, want: sizes{500, 500, 1000}},
		{workload: WorkloadTopologySpreading, flags: defaultSizes, want: sizes{5000, 5000, 2000}},
		{workload: WorkloadTopologySpreading, flags: Sizes{InitPods: 0}, want: sizes{5000, 0, 2000}},
		{workload: WorkloadPodAntiAffinity, flags: defaultSizes, want: sizes{5000, 1000, 1000}},
		{workload: WorkloadPodAntiAffinity, flags: Sizes{Nodes: 100, InitPods: 60, Pods: 50}, wantErr: "must not exceed nodes"},
		{workload: WorkloadPreferredAffinity, flags: defaultSizes, want: sizes{5000, 5000, 1000}},
		{workload: WorkloadPreemption, flags: defaultSizes, want: sizes{500, 2000, 500}},
		{workload: WorkloadPreemption, flags: Sizes{Nodes: 5000, InitPods: -1}, want: sizes{5000, 20000, 5000}},
		{workload: WorkloadPreemption, flags: Sizes{Nodes: 10, InitPods: -1, Pods: 11}, wantErr: "one preemptor fits per node"},
		{workload: WorkloadAlibaba, flags: defaultSizes, wantErr: "no trace loaded"},
		{workload: "nope", flags: defaultSizes, wantErr: "unknown workload"},
	}
	for _, tt := range tests {
		t.Run(tt.workload, func(t *testing.T) {
			w, err := newWorkload(tt.workload, "r", tt.flags, Shape{}, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, sizes{w.nodes, w.initPods, w.pods}); diff != "" {
				t.Errorf("sizes (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWorkloadShapeOverride(t *testing.T) {
	override := Shape{NodeCPU: 8000, PodMemory: 1 << 30}
	w, err := newWorkload(WorkloadBasic, "r", defaultSizes, override, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.node(0).Allocatable["cpu"]; got != 8000 {
		t.Errorf("node cpu %d, want the override 8000", got)
	}
	if got := w.node(0).Allocatable["memory"]; got != 128<<30 {
		t.Errorf("node memory %d, want basic's 128Gi", got)
	}
	if got := w.pod(0).Containers[0].Requests["memory"]; got != 1<<30 {
		t.Errorf("pod memory %d, want the override", got)
	}
	// Preemption ignores overrides: they would break the fill.
	p, err := newWorkload(WorkloadPreemption, "r", defaultSizes, override, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.node(0).Allocatable["cpu"]; got != 4000 {
		t.Errorf("preemption node cpu %d, want 4000", got)
	}
}

func TestAlibabaWorkload(t *testing.T) {
	tr, err := trace.Load(testTraceDir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWorkload(WorkloadAlibaba, "r", Sizes{Nodes: 99, InitPods: 7, Pods: 99}, Shape{}, tr)
	if err != nil {
		t.Fatal(err)
	}
	// Sizes come from the (already limited) trace.
	if w.nodes != 3 || w.initPods != 0 || w.pods != 6 || w.trace != tr {
		t.Errorf("sizes %d/%d/%d, want 3 nodes, 0 init, 6 pods of the trace", w.nodes, w.initPods, w.pods)
	}
	if got := w.node(1).Name; got != "r-node-b" {
		t.Errorf("node 1 is %q, want r-node-b", got)
	}
	if !strings.Contains(strings.Join(w.notes, "\n"), "1 GPU-sharing pods") {
		t.Errorf("notes %q do not count the GPU-sharing pod", w.notes)
	}
}

func TestChecks(t *testing.T) {
	at := func(phase podPhase, nodes ...int) []placement {
		var ps []placement
		for _, n := range nodes {
			ps = append(ps, placement{phase: phase, node: n})
		}
		return ps
	}
	tests := []struct {
		name  string
		check func([]placement) []string
		ps    []placement
		want  int
	}{
		{"node affinity ok", checkNodeAffinity, at(phaseMeasured, 0, 1, 10, 21, -1), 0},
		{"node affinity zone-2", checkNodeAffinity, at(phaseMeasured, 0, 12), 1},
		{"skew 1", checkZoneSkew, at(phaseMeasured, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0},
		{"skew 2", checkZoneSkew, at(phaseMeasured, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20), 1},
		{"skew ignores init pods", checkZoneSkew, at(phaseInit, 0, 10, 20), 0},
		{"one per node", checkOnePerNode, append(at(phaseInit, 1, 2), at(phaseMeasured, 3, -1, -1)...), 0},
		{"shared node", checkOnePerNode, append(at(phaseInit, 1, 2), at(phaseMeasured, 2)...), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.check(tt.ps); len(got) != tt.want {
				t.Errorf("violations %q, want %d", got, tt.want)
			}
		})
	}
}

func TestTraceToWire(t *testing.T) {
	gpuNode := traceNodeToWire("r", 13, trace.Node{Name: "n", CPUMilli: 64000, MemoryMiB: 1024, GPUs: 2, Model: "T4"})
	wantNode := &berthv1.Node{
		Name: "r-n",
		Allocatable: map[string]int64{
			"cpu": 64000, "memory": 1024 << 20, "pods": 110, "ephemeral-storage": 100 << 30, trace.GPUResource: 2,
		},
		Labels: map[string]string{labelHostname: "r-n", labelZone: "zone-3", trace.ModelLabel: "T4"},
	}
	if diff := cmp.Diff(wantNode, gpuNode, protocmp.Transform()); diff != "" {
		t.Errorf("GPU node (-want,+got):\n%s", diff)
	}
	cpuNode := traceNodeToWire("r", 0, trace.Node{Name: "c", CPUMilli: 1, MemoryMiB: 1})
	if _, ok := cpuNode.Allocatable[trace.GPUResource]; ok {
		t.Errorf("CPU-only node offers %s", trace.GPUResource)
	}
	if _, ok := cpuNode.Labels[trace.ModelLabel]; ok {
		t.Errorf("CPU-only node has a model label")
	}

	sharing := tracePodToWire("r", trace.Pod{Name: "p", CPUMilli: 6000, MemoryMiB: 2, GPUs: 1, GPUMilli: 460})
	wantPod := &berthv1.Pod{
		Namespace: measuredNamespace, Name: "r-p", Labels: map[string]string{"app": "r"},
		Containers: []*berthv1.Container{{Name: "main", Image: "registry.example/trace:1", Requests: map[string]int64{
			"cpu": 6000, "memory": 2 << 20, trace.GPUResource: 1,
		}}},
	}
	if diff := cmp.Diff(wantPod, sharing, protocmp.Transform()); diff != "" {
		t.Errorf("GPU-sharing pod (-want,+got):\n%s", diff)
	}
	cpuPod := tracePodToWire("r", trace.Pod{Name: "q", CPUMilli: 1, MemoryMiB: 1})
	if _, ok := cpuPod.Containers[0].Requests[trace.GPUResource]; ok {
		t.Errorf("CPU pod requests %s", trace.GPUResource)
	}
}
