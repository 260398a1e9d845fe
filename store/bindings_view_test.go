package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// viewOf keeps of a fully decoded pod what decodeBindingView decodes.
func viewOf(p *berthv1.Pod) *berthv1.Pod {
	return &berthv1.Pod{Namespace: p.Namespace, Name: p.Name, Uid: p.Uid, NodeName: p.NodeName, Status: p.Status}
}

func checkBindingView(t *testing.T, what string, value []byte) {
	t.Helper()
	full, ferr := decodePod(value)
	view, verr := decodeBindingView(value)
	if (ferr != nil) != (verr != nil) {
		t.Fatalf("%s: decodePod error %v, decodeBindingView error %v", what, ferr, verr)
	}
	if ferr == nil && !proto.Equal(view, viewOf(full)) {
		t.Fatalf("%s: view %v, want %v", what, view, viewOf(full))
	}
	// The binding watch skips the decode of a value that names no node:
	// it must be a pod holding none.
	if !namesNode(value) && ferr == nil && full.NodeName != "" {
		t.Fatalf("%s: namesNode false for a pod with node %q", what, full.NodeName)
	}
}

func TestBindingViewMatchesFullDecode(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 12))
	for i := range 3000 {
		p := &berthv1.Pod{}
		randomFill(r, p.ProtoReflect(), 4)
		value, err := marshalOpts.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		checkBindingView(t, "random pod", value)
		if i%10 == 0 && len(value) > 0 {
			// Damaged values fail (or not) alike.
			checkBindingView(t, "truncated pod", value[:r.IntN(len(value))])
		}
	}

	s1, _ := proto.Marshal(&berthv1.Pod{Status: &berthv1.PodStatus{Message: "m", Rejections: []*berthv1.NodeRejection{{NodeName: "a"}}}})
	s2, _ := proto.Marshal(&berthv1.Pod{Name: "second", Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND, Rejections: []*berthv1.NodeRejection{{NodeName: "b"}}}})
	head, _ := proto.Marshal(&berthv1.Pod{Namespace: "ns", Name: "first", Uid: "u", NodeName: "n"})
	checkBindingView(t, "status repeated, name repeated", append(append(append([]byte{}, head...), s1...), s2...))
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte{0xff, 0xfe})
	checkBindingView(t, "invalid UTF-8 uid", append(append([]byte{}, head...), badUTF8...))
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 7)
	checkBindingView(t, "name with a varint", append(append([]byte{}, head...), wrongType...))
	checkBindingView(t, "empty", nil)
	emptyNode := protowire.AppendBytes(protowire.AppendTag(nil, podNodeNameField, protowire.BytesType), nil)
	checkBindingView(t, "node_name set, then emptied", append(append([]byte{}, head...), emptyNode...))
	checkBindingView(t, "node_name emptied, then set", append(append([]byte{}, emptyNode...), head...))
	if namesNode(append(append([]byte{}, head...), emptyNode...)) {
		t.Errorf("namesNode true for a pod whose last node_name is empty")
	}
	if !namesNode(head) {
		t.Errorf("namesNode false for a pod with a node")
	}
}
