package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// groupRecorder is a SyncHandler that also takes pod groups.
type groupRecorder struct {
	*recordingHandler
}

func (h groupRecorder) PodGroupsReset(gs []*berthv1.PodGroup) {
	var names []string
	for _, g := range gs {
		names = append(names, "group:"+g.Namespace+"/"+g.Name)
	}
	h.calls <- call{Kind: "PodGroupsReset", Names: names}
}

func (h groupRecorder) PodGroupPut(g *berthv1.PodGroup, rev int64) {
	h.calls <- call{Kind: "PodGroupPut", Rev: rev, Names: []string{g.Namespace + "/" + g.Name}, State: g.GetScheduleTimeout().AsDuration().String()}
}

func (h groupRecorder) PodGroupDeleted(ns, name string, rev int64) {
	h.calls <- call{Kind: "PodGroupDeleted", Rev: rev, Names: []string{ns + "/" + name}}
}

func TestPodGroupLifecycle(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)

	stored, rev, err := s.PutPodGroup(ctx, &berthv1.PodGroup{Namespace: "ns", Name: "g1", MinMember: 3})
	if err != nil || rev == 0 {
		t.Fatalf("PutPodGroup = %d, %v", rev, err)
	}
	if got := stored.GetScheduleTimeout().AsDuration(); got != DefaultScheduleTimeout {
		t.Fatalf("stored schedule_timeout %v, want the default %v", got, DefaultScheduleTimeout)
	}
	explicit := &berthv1.PodGroup{Namespace: "ns", Name: "g2", MinMember: 1, ScheduleTimeout: durationpb.New(0)}
	if _, _, err := s.PutPodGroup(ctx, explicit); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutPodGroup(ctx, &berthv1.PodGroup{Namespace: "other", Name: "g1", MinMember: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPodGroup(ctx, "ns", "g2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(explicit, got, protocmp.Transform()); diff != "" {
		t.Errorf("an explicit zero timeout must be kept (-want,+got):\n%s", diff)
	}
	list, err := s.ListPodGroups(ctx, "ns")
	if err != nil || len(list) != 2 || list[0].GetName() != "g1" || list[1].GetName() != "g2" {
		t.Fatalf("ListPodGroups(ns) = %v, %v", list, err)
	}
	if all, err := s.ListPodGroups(ctx, ""); err != nil || len(all) != 3 {
		t.Fatalf("ListPodGroups() = %v, %v", all, err)
	}
	if _, err := s.DeletePodGroup(ctx, "ns", "g1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeletePodGroup(ctx, "ns", "g1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.GetPodGroup(ctx, "ns", "g1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	// Groups live beside pods in the keyspace but are not pods.
	if pods, _, err := s.ListPods(ctx, PodFilter{}, 0, ""); err != nil || len(pods) != 0 {
		t.Fatalf("ListPods = %v, %v; want none", pods, err)
	}
}

func TestPodGroupValidation(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	for _, g := range []*berthv1.PodGroup{
		nil,
		{Namespace: "ns", Name: "g", MinMember: 0},
		{Namespace: "", Name: "g", MinMember: 1},
		{Namespace: "ns", Name: "a/b", MinMember: 1},
		{Namespace: "ns", Name: "g", MinMember: 1, ScheduleTimeout: durationpb.New(-time.Second)},
	} {
		if _, _, err := s.PutPodGroup(testCtx(t), g); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("PutPodGroup(%v) = %v, want ErrInvalidArgument", g, err)
		}
	}
}

// Pod group keys sort between nodes and pods, inside the synced range.
func TestSyncDeliversPodGroups(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	if _, _, err := s.PutPodGroup(ctx, &berthv1.PodGroup{Namespace: "ns", Name: "before", MinMember: 1}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, pendingPod("ns", "p", "u1"))
	h := groupRecorder{newRecordingHandler()}
	runSync(t, s, h)
	first := h.next(t, 2)
	if first[0].Kind != "PodGroupsReset" || !contains(first[0].Names, "group:ns/before") {
		t.Fatalf("first call %+v, want PodGroupsReset listing the group", first[0])
	}
	if first[1].Kind != "Reset" || !contains(first[1].Names, "pod:ns/p") || contains(first[1].Names, "pod:ns/before") {
		t.Fatalf("second call %+v, want Reset with the pod only", first[1])
	}
	_, putRev, err := s.PutPodGroup(ctx, &berthv1.PodGroup{Namespace: "ns", Name: "after", MinMember: 2, ScheduleTimeout: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	delRev, err := s.DeletePodGroup(ctx, "ns", "before")
	if err != nil {
		t.Fatal(err)
	}
	want := []call{
		{Kind: "PodGroupPut", Rev: putRev, Names: []string{"ns/after"}, State: "1s"},
		{Kind: "PodGroupDeleted", Rev: delRev, Names: []string{"ns/before"}},
	}
	if diff := cmp.Diff(want, h.next(t, 2)); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
