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
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// randomFill sets each field of m at random (about half of them), to depth
// levels of nested messages: every kind of field a pod has (maps, repeated
// messages, enums, nested statuses) appears across many draws.
func randomFill(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.IntN(2) == 0 {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				mp.Set(randomScalar(r, fd.MapKey()).MapKey(), randomValue(r, mp, fd.MapValue(), depth))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					if depth > 0 {
						randomFill(r, l.AppendMutable().Message(), depth-1)
					}
					continue
				}
				l.Append(randomScalar(r, fd))
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 0 {
				randomFill(r, m.Mutable(fd).Message(), depth-1)
			}
		default:
			m.Set(fd, randomScalar(r, fd))
		}
	}
}

func randomValue(r *rand.Rand, mp protoreflect.Map, fd protoreflect.FieldDescriptor, depth int) protoreflect.Value {
	if fd.Kind() == protoreflect.MessageKind {
		v := mp.NewValue()
		if depth > 0 {
			randomFill(r, v.Message(), depth-1)
		}
		return v
	}
	return randomScalar(r, fd)
}

func randomScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("s%d", r.IntN(1000)))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(r.IntN(256))})
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(r.Int64N(1<<20) - 1<<19))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(r.Int64() - 1<<62)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(r.Uint32())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(r.Uint64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(r.Float32())
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(r.Float64())
	}
	panic(fmt.Sprintf("no random value for %v", fd.Kind()))
}

// randomStoredPod is the i-th random pod of an edit's test, and its
// encoding as the store writes it.
func randomStoredPod(t *testing.T, r *rand.Rand, i int) (*berthv1.Pod, []byte) {
	t.Helper()
	p := &berthv1.Pod{}
	randomFill(r, p.ProtoReflect(), 4)
	if i%5 == 0 {
		// Fields of a newer schema: kept, after the known ones.
		p.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "future"))
	}
	value, err := marshalOpts.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, value
}

// theSlowWay is what an edit of value must equal: decode, mark, and
// encode with proto itself.
func theSlowWay(t *testing.T, value []byte, mark func(*berthv1.Pod)) []byte {
	t.Helper()
	p, err := decodePod(value)
	if err != nil {
		t.Fatal(err)
	}
	mark(p)
	out, err := marshalOpts.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// boundTheSlowWay is what MarkBoundValue must equal.
func boundTheSlowWay(t *testing.T, value []byte, node, replica string, now time.Time) []byte {
	t.Helper()
	return theSlowWay(t, value, func(p *berthv1.Pod) { MarkBound(p, node, replica, now) })
}

func TestMarkBoundValueMatchesDecodeAndEncode(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 11))
	times := []time.Time{
		time.Unix(1_700_000_000, 123_456_789),
		time.Unix(1_700_000_000, 0),
		time.Unix(0, 5),
		time.Unix(0, 0),
		time.Unix(-5, 7),
	}
	for i := range 3000 {
		p, value := randomStoredPod(t, r, i)
		node := []string{"n1", "node-with-a-longer-name", fmt.Sprintf("n%d", r.IntN(100000))}[r.IntN(3)]
		replica := []string{"", "replica-a"}[r.IntN(2)]
		now := times[r.IntN(len(times))]
		want := boundTheSlowWay(t, value, node, replica, now)
		got, err := MarkBoundValue(value, node, replica, now)
		if err != nil {
			t.Fatalf("seed %d, pod %d: %v", seed, i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d, pod %d (%v): patched encoding differs from decode+MarkBound+encode\n got %x\nwant %x", seed, i, p, got, want)
		}
		if fast, err := patchBound(value, node, replica, now); err != nil || !bytes.Equal(fast, want) {
			t.Fatalf("seed %d, pod %d: the byte edit was not taken (%v) or differs", seed, i, err)
		}
	}
}

// A value not laid out the way the store writes (a status repeated, which a
// decoder merges; fields out of order) is rewritten through decoding.
func TestMarkBoundValueNonCanonicalInput(t *testing.T) {
	now := time.Unix(1_700_000_000, 42)
	status1, _ := proto.Marshal(&berthv1.Pod{Status: &berthv1.PodStatus{Message: "why", Rejections: []*berthv1.NodeRejection{{NodeName: "a", Reason: "full"}}}})
	status2, _ := proto.Marshal(&berthv1.Pod{Status: &berthv1.PodStatus{NominatedNodeName: "b", Rejections: []*berthv1.NodeRejection{{NodeName: "c"}}}})
	head, _ := proto.Marshal(&berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u"})
	tail, _ := proto.Marshal(&berthv1.Pod{PodGroup: "g", SchedulingGates: []string{"x"}})
	nodeName, _ := proto.Marshal(&berthv1.Pod{NodeName: "old"})
	for name, value := range map[string][]byte{
		"status repeated":    bytes.Join([][]byte{head, status1, status2, tail}, nil),
		"fields reordered":   bytes.Join([][]byte{tail, status1, head}, nil),
		"node_name repeated": bytes.Join([][]byte{head, nodeName, nodeName, tail}, nil),
		"namespace repeated": bytes.Join([][]byte{head, head[:4], tail}, nil),
		"name as a varint":   bytes.Join([][]byte{head, protowire.AppendVarint(protowire.AppendTag(nil, podSchedulerNameField, protowire.VarintType), 7), tail}, nil),
	} {
		if _, err := patchBound(value, "n", "r", now); err == nil {
			t.Errorf("%s: the byte edit accepted a value it cannot edit faithfully", name)
		}
		got, err := MarkBoundValue(value, "n", "r", now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := boundTheSlowWay(t, value, "n", "r", now); !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, want %x", name, got, want)
		}
	}
	if _, err := MarkBoundValue([]byte{0xff}, "n", "r", now); err == nil {
		t.Error("a value that does not decode was accepted")
	}
}

// unschedulableTheSlowWay is what MarkUnschedulableValue must equal.
func unschedulableTheSlowWay(t *testing.T, value []byte, message, nominated string, diag *berthv1.SchedulingDiagnosis) []byte {
	t.Helper()
	return theSlowWay(t, value, func(p *berthv1.Pod) { MarkUnschedulable(p, message, nominated, diag) })
}

func TestMarkUnschedulableValueMatchesDecodeAndEncode(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 12))
	for i := range 3000 {
		p, value := randomStoredPod(t, r, i)
		var diag *berthv1.SchedulingDiagnosis
		if r.IntN(4) > 0 {
			diag = &berthv1.SchedulingDiagnosis{}
			randomFill(r, diag.ProtoReflect(), 3)
		}
		message := []string{"", "0/3 nodes are available: 3 Insufficient cpu."}[r.IntN(2)]
		nominated := []string{"", "n1"}[r.IntN(2)]
		want := unschedulableTheSlowWay(t, value, message, nominated, diag)
		got, err := MarkUnschedulableValue(value, message, nominated, diag)
		if err != nil {
			t.Fatalf("seed %d, pod %d: %v", seed, i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d, pod %d (%v): patched encoding differs from decode+MarkUnschedulable+encode\n got %x\nwant %x", seed, i, p, got, want)
		}
		fast, err := patchPod(value, 0, nil, func(b, rejections []byte) ([]byte, bool) {
			return appendUnschedulableStatus(b, message, nominated, diag, rejections)
		})
		if err != nil || !bytes.Equal(fast, want) {
			t.Fatalf("seed %d, pod %d: the byte edit was not taken (%v) or differs", seed, i, err)
		}
	}
}

// What cannot be edited as bytes goes through decoding, errors included.
func TestMarkUnschedulableValueFallsBack(t *testing.T) {
	head, _ := proto.Marshal(&berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u", NodeName: "kept"})
	status, _ := proto.Marshal(&berthv1.Pod{Status: &berthv1.PodStatus{Message: "old", Rejections: []*berthv1.NodeRejection{{NodeName: "a", Reason: "full"}}}})
	tail, _ := proto.Marshal(&berthv1.Pod{PodGroup: "g"})
	reordered := bytes.Join([][]byte{tail, status, head}, nil)
	if _, err := patchPod(reordered, 0, nil, func(b, r []byte) ([]byte, bool) { return b, true }); err == nil {
		t.Error("the byte edit accepted fields out of order")
	}
	got, err := MarkUnschedulableValue(reordered, "why", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := unschedulableTheSlowWay(t, reordered, "why", "", nil); !bytes.Equal(got, want) {
		t.Errorf("reordered: got %x, want %x", got, want)
	}
	p, err := decodePod(got)
	if err != nil {
		t.Fatal(err)
	}
	if p.NodeName != "kept" || p.Status.GetMessage() != "why" || len(p.Status.GetRejections()) != 1 ||
		p.Status.GetPhase() != berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE {
		t.Errorf("edited pod %v: want node_name kept, the new message, the rejection kept, UNSCHEDULABLE", p)
	}
	if _, err := MarkUnschedulableValue(head, "not \xff UTF-8", "", nil); err == nil {
		t.Error("a message that is not UTF-8 was encoded")
	}
	if _, err := MarkUnschedulableValue([]byte{0xff}, "why", "", nil); err == nil {
		t.Error("a value that does not decode was accepted")
	}
}

// podFieldType must agree with the schema, or the byte edits would refuse
// every pod carrying the field, or copy one a decoder would move.
func TestPodFieldTypeMatchesSchema(t *testing.T) {
	fields := (&berthv1.Pod{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		want := protowire.BytesType
		if !fd.IsList() && !fd.IsMap() {
			switch fd.Kind() {
			case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.EnumKind, protoreflect.BoolKind, protoreflect.Uint32Kind, protoreflect.Uint64Kind:
				want = protowire.VarintType
			}
		}
		if got := podFieldType(fd.Number(), 99); got != want {
			t.Errorf("field %s (%d): podFieldType %v, want %v", fd.Name(), fd.Number(), got, want)
		}
		if repeated := fd.IsList() || fd.IsMap(); repeatedPodField(fd.Number()) != repeated {
			t.Errorf("field %s (%d): repeatedPodField %v, want %v", fd.Name(), fd.Number(), !repeated, repeated)
		}
	}
}

// BenchmarkMarkUnschedulable compares the byte edit with decoding,
// MarkUnschedulable and encoding, for a pod as a client submits one that
// was already found unschedulable once (its status holds a diagnosis).
func BenchmarkMarkUnschedulable(b *testing.B) {
	diag := &berthv1.SchedulingDiagnosis{NodesEvaluated: 3, Reasons: []*berthv1.ReasonCount{{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", NodeCount: 3}}, Time: timestamppb.New(time.Unix(1_700_000_000, 5))}
	p := &berthv1.Pod{Namespace: "default", Name: "web-7d9f8b6c5d-x2x4q", Uid: "2f1d6c1e-6a53-4c55-9d2b-2b0f6fbb6c1a",
		Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f8b6c5d"}, Priority: 100,
		Containers:    []*berthv1.Container{{Name: "main", Image: "registry.example/web:1.4.2", Requests: map[string]int64{"cpu": 500, "memory": 256 << 20}}},
		SchedulerName: "berth"}
	MarkUnschedulable(p, "0/3 nodes are available: 3 Insufficient cpu.", "", diag)
	value, err := marshalPod(p)
	if err != nil {
		b.Fatal(err)
	}
	const message = "0/3 nodes are available: 3 Insufficient cpu."
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MarkUnschedulableValue(value, message, "", diag); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := decodePod(value)
			if err != nil {
				b.Fatal(err)
			}
			MarkUnschedulable(p, message, "", diag)
			if _, err := marshalPod(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
