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

// boundTheSlowWay is what MarkBoundValue must equal: decode, MarkBound,
// encode.
func boundTheSlowWay(t *testing.T, value []byte, node, replica string, now time.Time) []byte {
	t.Helper()
	p, err := decodePod(value)
	if err != nil {
		t.Fatal(err)
	}
	MarkBound(p, node, replica, now)
	out, err := marshalOpts.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
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
