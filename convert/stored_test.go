package convert

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// storedPods are pods as the store writes them, in every shape the core
// reads: each must convert from its bytes exactly as from the decoded pod.
func storedPods() map[string]*berthv1.Pod {
	bound := basicPod("bound")
	bound.NodeName = "n1"
	bound.Priority = -5
	bound.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND, ScheduledBy: "r1",
		StartTime: timestamppb.New(time.Unix(1700000000, 123456789))}
	rich := basicPod("rich")
	rich.Overhead = map[string]int64{"cpu": 10}
	rich.InitContainers = []*berthv1.Container{{Name: "init", Image: "busybox", Requests: map[string]int64{"memory": 1 << 20}}}
	rich.Containers = append(rich.Containers, &berthv1.Container{Name: "side", Ports: []*berthv1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: berthv1.Protocol_PROTOCOL_UDP}}})
	rich.SchedulerName = "custom"
	rich.PodGroup = "g1"
	rich.PreemptionPolicy = berthv1.PreemptionPolicy_PREEMPTION_POLICY_NEVER
	rich.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING, NominatedNodeName: "n2", PreemptedBy: "ns/big", NodeLost: true}
	rare := basicPod("rare")
	rare.Tolerations = []*berthv1.Toleration{{Key: "k", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS, Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_EXECUTE, TolerationSeconds: 30}}
	rare.Affinity = &berthv1.Affinity{PodAntiAffinity: &berthv1.PodAntiAffinity{Required: []*berthv1.PodAffinityTerm{{
		LabelSelector: &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "zone"}}}}
	rare.TopologySpreadConstraints = []*berthv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", MinDomains: 2,
		WhenUnsatisfiable: berthv1.UnsatisfiableConstraintAction_UNSATISFIABLE_CONSTRAINT_ACTION_SCHEDULE_ANYWAY}}
	rare.SchedulingGates = []string{"wait"}
	diagnosed := unschedulable("diagnosed")
	diagnosed.Status.Diagnosis = &berthv1.SchedulingDiagnosis{NodesEvaluated: 3, Reasons: []*berthv1.ReasonCount{{}}}
	diagnosed.Status.Rejections = []*berthv1.NodeRejection{{NodeName: "n1", NodeRevision: 3}, {NodeName: "n1", NodeRevision: 5}}
	manyLabels := basicPod("many")
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		manyLabels.Labels[k] = k
	}
	return map[string]*berthv1.Pod{
		"empty": {}, "basic": basicPod("basic"), "bound": bound, "rich": rich, "rare": rare,
		"unschedulable": unschedulable("u"), "diagnosed": diagnosed, "many labels": manyLabels,
	}
}

func TestStoredValueToCoreIsStoredPodToCore(t *testing.T) {
	for name, p := range storedPods() {
		stored, err := storedPodOptions.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		// Twice: the second finds the shared fields by their bytes.
		for round := range 2 {
			got, err := StoredValueToCore(stored, 7, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if diff := cmp.Diff(StoredPodToCore(p, stored, 7), got); diff != "" {
				t.Errorf("%s, round %d: (-StoredPodToCore,+StoredValueToCore):\n%s", name, round, diff)
			}
		}
		if _, ok := pods.fastPod(stored, 7); !ok {
			t.Errorf("%s: canonical encoding took the slow path", name)
		}
	}
}

// Bytes the store would not write take the slow path, which gives what a
// decoder makes of them, errors included.
func TestStoredValueToCoreOddLayouts(t *testing.T) {
	p := basicPod("odd")
	p.NodeName = "n1"
	stored, err := storedPodOptions.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	// node_name before namespace, and twice: the last one wins.
	reversed := protowire.AppendString(protowire.AppendTag(nil, 9, protowire.BytesType), "n2")
	reversed = append(reversed, stored...)
	unknown := protowire.AppendString(protowire.AppendTag(append([]byte(nil), stored...), 99, protowire.BytesType), "future")
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5)
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "\xff")
	for name, value := range map[string][]byte{
		"out of order": reversed, "unknown field": unknown, "wrong wire type": wrongType,
		"invalid utf-8": badUTF8, "truncated": stored[:len(stored)-1],
	} {
		want := &berthv1.Pod{}
		wantErr := proto.Unmarshal(value, want)
		got, err := StoredValueToCore(value, 3, true)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, want %v", name, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if diff := cmp.Diff(StoredPodToCore(want, value, 3), got); diff != "" {
			t.Errorf("%s: (-decoded,+StoredValueToCore):\n%s", name, diff)
		}
	}
}

// A pending pod keeps its record: a copy when the bytes were lent.
func TestStoredValueToCoreSource(t *testing.T) {
	stored, err := storedPodOptions.Marshal(basicPod("src"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := StoredValueToCore(stored, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	stored[len(stored)-1] ^= 0xff // the lender reuses its buffer
	if w, err := WirePod(got); err != nil || w.GetName() != "src" {
		t.Errorf("borrowed value: WirePod = %v, %v", w, err)
	}
}

// A bound pod of a known workload costs the pod and its name and uid.
func TestStoredValueToCoreAllocations(t *testing.T) {
	p := basicPod("allocs")
	p.Name = "a-name-long-enough-not-to-fit-on-the-stack"
	p.NodeName = "n1"
	p.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND, StartTime: timestamppb.Now()}
	stored, err := storedPodOptions.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StoredValueToCore(stored, 1, true); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { StoredValueToCore(stored, 1, true) }); n > 2 {
		t.Errorf("%v allocations per bound pod, want at most 2", n)
	}
}

// FuzzStoredValueToCore: whatever the bytes, the direct read agrees with
// decoding then converting, errors included, so a value the fast path
// misreads cannot reach the core.
func FuzzStoredValueToCore(f *testing.F) {
	for _, p := range storedPods() {
		stored, err := storedPodOptions.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(stored)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		want := &berthv1.Pod{}
		wantErr := proto.Unmarshal(value, want)
		got, err := StoredValueToCore(value, 5, true)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(StoredPodToCore(want, value, 5), got); diff != "" {
			t.Fatalf("(-decoded,+StoredValueToCore):\n%s", diff)
		}
	})
}

// Conversions on several goroutines, as a restart's bulk load runs them,
// give what one conversion alone gives, while some of them bring values
// the tables lack (run under -race: readers share the tables while
// writers add to them).
func TestConcurrentConversionsMatchAlone(t *testing.T) {
	type stored struct {
		pod   *berthv1.Pod
		value []byte
	}
	var all []stored
	for _, p := range storedPods() {
		v, err := storedPodOptions.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, stored{p, v})
	}
	const workers, rounds = 4, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				fresh := basicPod(fmt.Sprintf("fresh-%d-%d", w, r))
				fresh.Labels["round"] = fmt.Sprint(w, "-", r) // new to the tables
				fresh.NodeName = fmt.Sprintf("node-%d-%d", w, r)
				v, err := storedPodOptions.Marshal(fresh)
				if err != nil {
					t.Error(err)
					return
				}
				// Clipped: the workers must not append into one array.
				for _, s := range append(slices.Clip(all), stored{fresh, v}) {
					got, err := StoredValueToCore(s.value, 7, true)
					if err != nil {
						t.Error(err)
						return
					}
					if diff := cmp.Diff(StoredPodToCore(s.pod, s.value, 7), got); diff != "" {
						t.Errorf("%s: (-alone,+concurrent):\n%s", s.pod.GetName(), diff)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// The fast path reads fields by number and lets only list and map fields
// repeat: both must be the schema's, or it would read one field as another
// or refuse every pod that carries a new list.
func TestPodFieldNumbersMatchSchema(t *testing.T) {
	pod := (&berthv1.Pod{}).ProtoReflect().Descriptor().Fields()
	status := (&berthv1.PodStatus{}).ProtoReflect().Descriptor().Fields()
	for _, f := range []struct {
		fields protoreflect.FieldDescriptors
		name   protoreflect.Name
		num    protowire.Number
	}{
		{pod, "namespace", podNamespaceField}, {pod, "name", podNameField}, {pod, "uid", podUIDField},
		{pod, "labels", podLabelsField}, {pod, "priority", podPriorityField}, {pod, "containers", podContainersField},
		{pod, "init_containers", podInitContainersField}, {pod, "overhead", podOverheadField},
		{pod, "node_name", podNodeNameField}, {pod, "scheduler_name", podSchedulerNameField},
		{pod, "status", podStatusField}, {pod, "node_selector", podNodeSelectorField},
		{pod, "tolerations", podTolerationsField}, {pod, "topology_spread_constraints", podSpreadField},
		{pod, "scheduling_gates", podGatesField}, {pod, "preemption_policy", podPreemptionField},
		{pod, "pod_group", podGroupField},
		{status, "phase", statusPhaseField}, {status, "message", statusMessageField},
		{status, "nominated_node_name", statusNominatedField}, {status, "start_time", statusStartTimeField},
		{status, "preempted_by", statusPreemptedByField}, {status, "scheduled_by", statusScheduledByField},
		{status, "node_lost", statusNodeLostField},
	} {
		if fd := f.fields.ByName(f.name); fd == nil || fd.Number() != f.num {
			t.Errorf("field %s: the fast path reads number %d; the schema has %v", f.name, f.num, fd)
		}
	}
	for i := range pod.Len() {
		fd := pod.Get(i)
		if repeated := fd.IsList() || fd.IsMap(); isRepeated(fd.Number()) != repeated {
			t.Errorf("field %s (%d): isRepeated %v, want %v", fd.Name(), fd.Number(), !repeated, repeated)
		}
	}
}
