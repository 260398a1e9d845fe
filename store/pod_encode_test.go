package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestMarshalPodMatchesProto(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 29))
	same := func(p *berthv1.Pod) {
		t.Helper()
		want, wantErr := marshalOpts.Marshal(p)
		got, err := marshalPod(p)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("seed %d: marshalPod(%v) = %x, %v; proto gives %x, %v", seed, p, got, err, want, wantErr)
		}
		// marshalPod falls back to proto when the direct path fails or
		// misjudges its size, which would hide a bug in either: check the
		// direct path on its own.
		if wantErr == nil && directlyEncodable(p) {
			n := podSize(p)
			direct, ok := appendPod(make([]byte, 0, n), p)
			if !ok || len(direct) != n || !bytes.Equal(direct, want) {
				t.Fatalf("seed %d: the direct path gives %x (ok %v, sized %d), proto %x", seed, direct, ok, n, want)
			}
		}
	}
	direct := 0
	for i := range 3000 {
		p := &berthv1.Pod{}
		randomFill(r, p.ProtoReflect(), 3)
		switch i % 10 {
		case 0: // more map entries than the sort's stack buffer holds
			p.Labels = map[string]string{}
			for j := range 20 {
				p.Labels[fmt.Sprintf("k%d", r.IntN(100))] = fmt.Sprint(j)
			}
		case 1: // empty keys and values, which map entries still carry
			p.Labels = map[string]string{"": "", "a": ""}
			p.Overhead = map[string]int64{"": 0, "cpu": -5}
		case 2: // unknown enum numbers, negative ones included
			p.PreemptionPolicy = berthv1.PreemptionPolicy(-3)
			if p.Status == nil {
				p.Status = &berthv1.PodStatus{}
			}
			p.Status.Phase = berthv1.PodPhase(99)
		case 3: // an empty status, which is still written
			p.Status = &berthv1.PodStatus{}
		case 4: // unknown fields: through proto
			p.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), 5))
		case 5: // invalid UTF-8: proto's error
			p.Name = "bad\xff"
		case 6:
			if len(p.Containers) > 0 {
				p.Containers[0].Requests = map[string]int64{"\xfe": 1}
			}
		case 7:
			p.Containers = append(p.Containers, nil)
		}
		same(p)
		if directlyEncodable(p) {
			direct++
		}
	}
	if direct < 1500 {
		t.Fatalf("seed %d: only %d of 3,000 pods took the direct path", seed, direct)
	}
	// The pods of a bench: no optional messages at all.
	same(&berthv1.Pod{Namespace: "bench", Name: "p", Containers: []*berthv1.Container{{Name: "main", Requests: map[string]int64{"cpu": 100}}},
		Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING}})
	same(&berthv1.Pod{})
}

// TestPodEncoderKnowsEveryField fails when a field is added to a message
// marshalPod writes itself and not to it: the direct path would drop it.
func TestPodEncoderKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		msg    proto.Message
		fields map[string]protowire.Number
	}{
		{&berthv1.Pod{}, map[string]protowire.Number{
			"namespace": podNamespaceField, "name": podNameField, "uid": podUIDField, "labels": podLabelsField,
			"priority": podPriorityField, "containers": podContainersField, "init_containers": podInitContainersField,
			"overhead": podOverheadField, "node_name": podNodeNameField, "scheduler_name": podSchedulerNameField,
			"status": podStatusField, "node_selector": podNodeSelectorField, "tolerations": podTolerationsField,
			"affinity": podAffinityField, "topology_spread_constraints": podSpreadField,
			"scheduling_gates": podSchedulingGatesField, "preemption_policy": podPreemptionPolicyField, "pod_group": podGroupField,
		}},
		{&berthv1.Container{}, map[string]protowire.Number{
			"name": containerNameField, "image": containerImageField, "requests": containerRequestsField, "ports": containerPortsField,
		}},
		{&berthv1.PodStatus{}, map[string]protowire.Number{
			"phase": statusPhaseField, "message": statusMessageField, "nominated_node_name": statusNominatedField,
			"start_time": statusStartTimeField, "diagnosis": statusDiagnosisField, "preempted_by": statusPreemptedByField,
			"scheduled_by": statusScheduledByField, "rejections": statusRejectionsField, "node_lost": statusNodeLostField,
		}},
	} {
		fields := c.msg.ProtoReflect().Descriptor().Fields()
		if fields.Len() != len(c.fields) {
			t.Errorf("%s has %d fields, marshalPod writes %d", c.msg.ProtoReflect().Descriptor().FullName(), fields.Len(), len(c.fields))
		}
		for i := range fields.Len() {
			fd := fields.Get(i)
			if num, ok := c.fields[string(fd.Name())]; !ok || num != fd.Number() {
				t.Errorf("%s: marshalPod writes field %d for it, not %d", fd.FullName(), num, fd.Number())
			}
			if fd.ContainingOneof() != nil || fd.HasPresence() && fd.Kind() != protoreflect.MessageKind {
				t.Errorf("%s: marshalPod writes every scalar with implicit presence", fd.FullName())
			}
		}
	}
}

func BenchmarkMarshalPod(b *testing.B) {
	p := &berthv1.Pod{
		Namespace: "bench", Name: "scale-7f3a-000123", Uid: "0f8fad5b-d9cb-469f-a165-70867728950e",
		Labels: map[string]string{"app": "scale-7f3a", "tier": "web"},
		Containers: []*berthv1.Container{{
			Name: "main", Image: "registry.example/app:1",
			Requests: map[string]int64{"cpu": 100, "memory": 128 << 20},
		}},
		Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING},
	}
	for _, c := range []struct {
		name    string
		marshal func(*berthv1.Pod) ([]byte, error)
	}{
		{"direct", marshalPod},
		{"proto", func(p *berthv1.Pod) ([]byte, error) { return marshalOpts.Marshal(p) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.marshal(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
