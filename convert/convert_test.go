package convert

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
)

func TestNodeToCore(t *testing.T) {
	n := &berthv1.Node{
		Name:        "n1",
		Allocatable: map[string]int64{"cpu": 4000},
		Labels:      map[string]string{"zone": "a"},
		Taints:      []*berthv1.Taint{{Key: "k", Value: "v", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_EXECUTE}},
	}
	want := &framework.Node{
		Name:        "n1",
		Allocatable: framework.ResourceList{"cpu": 4000, framework.ResourcePods: DefaultMaxPods},
		Labels:      map[string]string{"zone": "a"},
		Taints: []framework.Taint{
			{Key: "k", Value: "v", Effect: framework.TaintEffectNoExecute},
			{Key: framework.TaintNodeUnreachable, Effect: framework.TaintEffectNoSchedule},
		},
		Revision: 7,
	}
	if diff := cmp.Diff(want, NodeToCore(n, 7, true)); diff != "" {
		t.Errorf("NodeToCore (-want,+got):\n%s", diff)
	}
	if _, ok := n.GetAllocatable()[framework.ResourcePods]; ok {
		t.Error("defaulting pods wrote into the wire node")
	}
}

func TestPodToCoreKeepsTheSource(t *testing.T) {
	p := &berthv1.Pod{
		Namespace: "ns", Name: "p", Uid: "u",
		Containers:       []*berthv1.Container{{Name: "c", Requests: map[string]int64{"cpu": 100}}},
		PreemptionPolicy: berthv1.PreemptionPolicy_PREEMPTION_POLICY_NEVER,
		Status: &berthv1.PodStatus{Rejections: []*berthv1.NodeRejection{
			{NodeName: "n1", NodeRevision: 3}, {NodeName: "n1", NodeRevision: 5},
		}},
	}
	got := PodToCore(p, 9)
	src, err := WirePod(got)
	if err != nil || !proto.Equal(src, p) || got.Revision != 9 || got.Phase != framework.PodPending || got.PreemptionPolicy != framework.PreemptNever {
		t.Errorf("PodToCore: source %v, %v (want %v), revision %d, phase %v, policy %v", src, err, p, got.Revision, got.Phase, got.PreemptionPolicy)
	}
	if diff := cmp.Diff(map[string]int64{"n1": 5}, got.Rejections()); diff != "" {
		t.Errorf("rejections: the latest per node wins (-want,+got):\n%s", diff)
	}
	if _, err := WirePod(&framework.Pod{Namespace: "ns", Name: "p"}); err == nil {
		t.Error("WirePod of a pod without a record: want an error")
	}
}

// A stored pod keeps only its encoded value; decisions decode it on
// demand, each as a copy of its own.
func TestStoredPodDecodesOnDemand(t *testing.T) {
	p := &berthv1.Pod{
		Namespace: "ns", Name: "p", Uid: "u", Labels: map[string]string{"app": "a"},
		Containers: []*berthv1.Container{{Name: "c", Image: "img", Requests: map[string]int64{"cpu": 100}}},
		Status:     &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE, Message: "no room"},
	}
	stored, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	got := StoredPodToCore(p, stored, 4)
	if string(got.Source) != string(stored) {
		t.Fatalf("Source = %q, want the stored value", got.Source)
	}
	if diff := cmp.Diff(PodToCore(p, 4), got, cmpopts.IgnoreFields(framework.Pod{}, "Source")); diff != "" {
		t.Errorf("StoredPodToCore differs from PodToCore (-want,+got):\n%s", diff)
	}
	if string(PodToCore(p, 4).Source) == "" {
		t.Error("PodToCore keeps no record")
	}
	for range 2 {
		w, err := WirePod(got)
		if err != nil || !proto.Equal(w, p) {
			t.Fatalf("WirePod = %v, %v; want %v", w, err, p)
		}
		w.NodeName, w.Status = "n1", nil // a decision changes its copy
	}

	// A record not read from etcd is encoded in its place.
	bare := StoredPodToCore(p, nil, 4)
	if w, err := WirePod(bare); err != nil || !proto.Equal(w, p) {
		t.Errorf("without a stored value: WirePod = %v, %v; want %v", w, err, p)
	}
	if _, err := WirePod(&framework.Pod{Namespace: "ns", Name: "p", Source: "\xff"}); err == nil {
		t.Error("WirePod of a corrupt record: want an error")
	}
}

// A pod on a node keeps no record: the core decides nothing more about it
// that it would write without a read.
func TestBoundPodKeepsNoRecord(t *testing.T) {
	p := &berthv1.Pod{
		Namespace: "ns", Name: "p", Uid: "u", NodeName: "n1",
		Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND},
	}
	stored, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []*framework.Pod{StoredPodToCore(p, stored, 4), PodToCore(p, 4)} {
		if got.Source != "" || got.NodeName != "n1" || got.Phase != framework.PodBound || got.Revision != 4 {
			t.Errorf("bound pod: source %q, node %q, phase %v, revision %d; want no source, n1, bound, 4", got.Source, got.NodeName, got.Phase, got.Revision)
		}
		if _, err := WirePod(got); !errors.Is(err, ErrNoRecord) {
			t.Errorf("WirePod of a bound pod: %v, want ErrNoRecord", err)
		}
	}
}

func TestPodGroupTimeout(t *testing.T) {
	g := &berthv1.PodGroup{Namespace: "ns", Name: "g", MinMember: 3}
	if got := PodGroupToCore(g, time.Minute).ScheduleTimeout; got != time.Minute {
		t.Errorf("no timeout: got %v, want the default", got)
	}
	g.ScheduleTimeout = durationpb.New(5 * time.Second)
	if got := PodGroupToCore(g, time.Minute).ScheduleTimeout; got != 5*time.Second {
		t.Errorf("timeout: got %v, want 5s", got)
	}
}
