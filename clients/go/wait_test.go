package berth

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica/replicatest"
)

// startReplica runs a real replica on loopback against an embedded etcd in
// a temp dir and returns a client of it.
func startReplica(t *testing.T) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv, _ := replicatest.Start(t)
	c, err := Dial(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitPod(name string, cpu int64) *berthv1.Pod {
	return &berthv1.Pod{Namespace: "ns", Name: name, Containers: []*berthv1.Container{{Name: "c", Requests: map[string]int64{"cpu": cpu}}}}
}

// The first-program trap: a pod resubmitted after it was bound, whose
// binding a watch from "now" would never see, gets its binding at once.
// And a wait that starts only after the binding, from the revision of the
// submit, still finds it.
func TestSubmitAndWaitAgainstAReplica(t *testing.T) {
	c := startReplica(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, _, err := c.UpsertNode(ctx, &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 1000, "memory": 1 << 30, "pods": 10}}); err != nil {
		t.Fatal(err)
	}

	stored, rev, err := c.SubmitPod(ctx, waitPod("web", 100))
	if err != nil {
		t.Fatal(err)
	}
	pending := proto.Clone(stored).(*berthv1.Pod)
	got, err := c.WaitForBinding(ctx, stored, rev)
	if err != nil {
		t.Fatalf("WaitForBinding: %v", err)
	}
	if got.GetNodeName() != "n1" || got.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_BOUND {
		t.Fatalf("waited for %v on %q, want BOUND on n1", got.GetStatus().GetPhase(), got.GetNodeName())
	}

	// The binding is in the past now: a late wait from the submit's
	// revision, with the pod as it was then, must not wait for ever.
	late, err := c.WaitForBinding(ctx, pending, rev)
	if err != nil || late.GetNodeName() != "n1" {
		t.Fatalf("late WaitForBinding = %q, %v; want n1", late.GetNodeName(), err)
	}

	again, err := c.SubmitAndWait(ctx, waitPod("web", 100))
	if err != nil {
		t.Fatalf("resubmit: %v", err)
	}
	if again.GetUid() != stored.GetUid() || again.GetNodeName() != "n1" {
		t.Errorf("resubmit = uid %s on %q, want uid %s on n1", again.GetUid(), again.GetNodeName(), stored.GetUid())
	}

	fresh, err := c.SubmitAndWait(ctx, waitPod("api", 100))
	if err != nil || fresh.GetNodeName() != "n1" {
		t.Fatalf("SubmitAndWait(api) = %q, %v; want n1", fresh.GetNodeName(), err)
	}

	_, err = c.SubmitAndWait(ctx, waitPod("huge", 100_000))
	var unsched *UnschedulableError
	if !errors.As(err, &unsched) {
		t.Fatalf("SubmitAndWait(huge) = %v, want *UnschedulableError", err)
	}
	if unsched.Pod.GetStatus().GetDiagnosis() == nil {
		t.Errorf("unschedulable pod without a diagnosis: %v", unsched.Pod.GetStatus())
	}
}
