package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// A shallow copy equals its original (every field is set at random, so a
// field added to the message and not to the copy fails this), and
// replacing its fields leaves the original alone: what Admit and
// withCreateDefaults rely on.
func TestShallowCopy(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 13))
	for i := range 500 {
		p := &berthv1.Pod{}
		randomFill(r, p.ProtoReflect(), 3)
		if i%3 == 0 {
			p.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), 5))
		}
		before := proto.Clone(p)
		c := shallowCopy(p)
		if !proto.Equal(c, p) {
			t.Fatalf("seed %d: copy %v differs from %v", seed, c, p)
		}
		c.Uid, c.Status, c.NodeName = "other", &berthv1.PodStatus{Message: "x"}, "n"
		st := &berthv1.PodStatus{}
		randomFill(r, st.ProtoReflect(), 3)
		if cs := shallowCopyStatus(st); !proto.Equal(cs, st) {
			t.Fatalf("seed %d: status copy %v differs from %v", seed, cs, st)
		}
		admitted := Admit(p, time.Unix(5, 0))
		defaulted := withCreateDefaults(p)
		if !proto.Equal(p, before) {
			t.Fatalf("seed %d: changing a copy, Admit or withCreateDefaults changed the original", seed)
		}
		want := proto.Clone(p).(*berthv1.Pod)
		want.Status = &berthv1.PodStatus{Phase: createPhase(p.NodeName)}
		if p.NodeName != "" {
			want.Status.StartTime = admitted.Status.StartTime
		}
		if !proto.Equal(admitted, want) {
			t.Fatalf("seed %d: Admit = %v, want %v", seed, admitted, want)
		}
		if defaulted.Uid == "" || defaulted.GetStatus().GetPhase() == berthv1.PodPhase_POD_PHASE_UNSPECIFIED {
			t.Fatalf("seed %d: withCreateDefaults left uid %q phase %v", seed, defaulted.Uid, defaulted.GetStatus().GetPhase())
		}
	}
}
