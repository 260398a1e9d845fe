package store

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestNodeLifecycle(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	n := &berthv1.Node{
		Name:        "n1",
		Allocatable: map[string]int64{"cpu": 4000, "memory": 8 << 30, "pods": 110},
		Labels:      map[string]string{"zone": "a"},
		Taints:      []*berthv1.Taint{{Key: "k", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE}},
	}
	rev1, err := s.PutNode(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(n, got, protocmp.Transform()); diff != "" {
		t.Errorf("GetNode (-want +got):\n%s", diff)
	}
	n.Unschedulable = true
	rev2, err := s.PutNode(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev1 {
		t.Errorf("second put revision %d not after first %d", rev2, rev1)
	}
	if got, _ := s.GetNode(ctx, "n1"); !got.Unschedulable {
		t.Errorf("replace not stored: %v", got)
	}
	if _, err := s.DeleteNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetNode(ctx, "n1"); errIs(err, ErrNotFound) != "" {
		t.Errorf("GetNode after delete: %s", errIs(err, ErrNotFound))
	}
	if _, err := s.DeleteNode(ctx, "n1"); errIs(err, ErrNotFound) != "" {
		t.Errorf("DeleteNode of absent node: %s", errIs(err, ErrNotFound))
	}
	if _, err := s.PutNode(ctx, &berthv1.Node{Name: "a/b"}); errIs(err, ErrInvalidArgument) != "" {
		t.Errorf("PutNode with '/' in name: %s", errIs(err, ErrInvalidArgument))
	}
}

func TestListNodesPagination(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("node-%02d", i)
		want = append(want, name)
		if _, err := s.PutNode(ctx, &berthv1.Node{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pageSize := range []int{1, 3, 7, 100} {
		var got []string
		pages, token := 0, ""
		for {
			nodes, next, err := s.ListNodes(ctx, pageSize, token)
			if err != nil {
				t.Fatalf("page size %d: %v", pageSize, err)
			}
			pages++
			if len(nodes) > pageSize {
				t.Fatalf("page size %d: got %d nodes", pageSize, len(nodes))
			}
			for _, n := range nodes {
				got = append(got, n.Name)
			}
			if next == "" {
				break
			}
			token = next
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("page size %d (-want +got):\n%s", pageSize, diff)
		}
		if wantPages := (len(want) + pageSize - 1) / pageSize; pages != wantPages {
			t.Errorf("page size %d: %d pages, want %d", pageSize, pages, wantPages)
		}
	}
	if _, _, err := s.ListNodes(ctx, 2, "not-a-token!"); errIs(err, ErrInvalidArgument) != "" {
		t.Errorf("bad token: %s", errIs(err, ErrInvalidArgument))
	}
}
