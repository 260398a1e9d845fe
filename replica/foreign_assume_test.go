package replica_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// A gang member waiting at Permit on one replica holds its room on every
// replica: another replica leaves a pod that needs that room unschedulable
// until the assumption goes, then binds it.
// Long on purpose: one scenario, read top to bottom.
func TestOtherReplicasCountWaitingGangMembers(t *testing.T) {
	etcd, rs := startReplicas(t, 2)
	ctx := tctx(t)
	st, err := store.Open(ctx, store.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	// Who owns which shard, once both own some.
	owner := map[int]string{}
	var shards int
	eventually(t, 10*time.Second, "both replicas own shards", func() error {
		resp, err := rs[0].sch.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
		if err != nil {
			return err
		}
		clear(owner)
		for _, r := range resp.Replicas {
			for _, s := range r.Shards {
				owner[int(s)] = r.Id
			}
		}
		shards = int(resp.ShardCount)
		if len(resp.Replicas) != 2 || len(owner) != shards || !slices.Contains(mapValues(owner), "r0") || !slices.Contains(mapValues(owner), "r1") {
			return fmt.Errorf("ownership %v of %d shards", owner, shards)
		}
		return nil
	})
	// The gang is r0's, the other pod r1's.
	pick := func(id string, mk func(i int) *framework.Pod) *framework.Pod {
		for i := range 1000 {
			if p := mk(i); owner[scheduler.ShardOf(p, shards)] == id {
				return p
			}
		}
		t.Fatalf("no name hashes to %s", id)
		return nil
	}
	group := pick("r0", func(i int) *framework.Pod {
		return &framework.Pod{Namespace: "ns", Name: "a", PodGroup: fmt.Sprintf("g%d", i)}
	}).PodGroup
	other := pick("r1", func(i int) *framework.Pod { return &framework.Pod{Namespace: "ns", Name: fmt.Sprintf("big%d", i)} }).Name

	if _, err := rs[0].node.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs[0].pods.UpsertPodGroup(ctx, &berthv1.UpsertPodGroupRequest{PodGroup: podGroup(group, 2, 10*time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// a fits n1; b fits nowhere, so a waits at Permit for the group's
	// timeout, holding 600 of n1's 1000 cpu.
	a, b := gangPod("a", group, 600), gangPod("b", group, 100)
	b.NodeSelector = map[string]string{"no-such": "label"}
	if _, err := rs[0].pods.SubmitPods(ctx, &berthv1.SubmitPodsRequest{Pods: []*berthv1.Pod{a, b}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a waiting on n1", func() error {
		as, err := st.ListAssumptions(ctx, "ns")
		if err != nil || len(as) != 1 || as[0].Name != "a" || as[0].Node != "n1" || as[0].Replica != "r0" {
			return fmt.Errorf("assumptions %+v, %v", as, err)
		}
		return nil
	})

	big := pod(other)
	big.Containers[0].Requests["cpu"] = 600
	if _, err := rs[1].pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: big}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, other+" unschedulable", func() error {
		got, err := rs[1].pods.GetPod(ctx, &berthv1.GetPodRequest{Namespace: "ns", Name: other})
		if err != nil {
			return err
		}
		if n := got.GetPod().GetNodeName(); n != "" {
			t.Fatalf("%s was bound to %s while a held the room", other, n)
		}
		if ph := got.GetPod().GetStatus().GetPhase(); ph != berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE {
			return fmt.Errorf("%s is %v", other, ph)
		}
		return nil
	})
	if as, err := st.ListAssumptions(ctx, "ns"); err != nil || len(as) != 1 {
		t.Fatalf("a stopped waiting before the check: %+v, %v", as, err)
	}

	// Once the gang is gone, its room is free for r1.
	for _, n := range []string{"a", "b"} {
		if _, err := rs[0].pods.DeletePod(ctx, &berthv1.DeletePodRequest{Namespace: "ns", Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, other+" bound", func() error {
		got, err := rs[1].pods.GetPod(ctx, &berthv1.GetPodRequest{Namespace: "ns", Name: other})
		if err != nil {
			return err
		}
		if n := got.GetPod().GetNodeName(); n != "n1" {
			return fmt.Errorf("%s on %q (%v)", other, n, got.GetPod().GetStatus().GetPhase())
		}
		return nil
	})
}

func mapValues(m map[int]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
