package replica_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

func podGroup(name string, min int32, timeout time.Duration) *berthv1.PodGroup {
	return &berthv1.PodGroup{Namespace: "ns", Name: name, MinMember: min, ScheduleTimeout: durationpb.New(timeout)}
}

func gangPod(name, group string, cpu int64) *berthv1.Pod {
	p := pod(name)
	p.PodGroup = group
	p.Containers[0].Requests["cpu"] = cpu
	return p
}

// storeOf opens a second client on the test's etcd, to read what the
// server wrote: mod revisions and assumptions.
func storeOf(t *testing.T, e *env) *store.Store {
	t.Helper()
	s, err := store.Open(tctx(t), store.Config{Endpoints: e.etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// bindingLog records every binding event from the start of a test, so a
// test can tell that a gang was never partly bound.
type bindingLog struct {
	mu    sync.Mutex
	bound map[string]int64 // pod name -> revision of its BOUND event
}

func watchBindings(t *testing.T, e *env) *bindingLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := e.sched.WatchBindings(ctx, &berthv1.WatchBindingsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the listing's progress marker
		t.Fatal(err)
	}
	l := &bindingLog{bound: map[string]int64{}}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			if ev := resp.GetEvent(); ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
				l.mu.Lock()
				l.bound[ev.GetName()] = ev.GetRevision()
				l.mu.Unlock()
			}
		}
	}()
	return l
}

func (l *bindingLog) boundOf(names ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range names {
		if _, ok := l.bound[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// waitAllBoundTogether waits until every named pod is bound and checks
// they were bound by one commit: one mod revision for all.
func waitAllBoundTogether(t *testing.T, e *env, st *store.Store, names ...string) {
	t.Helper()
	eventually(t, 20*time.Second, "gang bound", func() error {
		for _, n := range names {
			got, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: n})
			if err != nil {
				return err
			}
			if got.GetPod().GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_BOUND {
				return fmt.Errorf("%s is %v", n, got.GetPod().GetStatus().GetPhase())
			}
		}
		return nil
	})
	revs := map[int64][]string{}
	for _, n := range names {
		_, rev, err := st.GetPod(tctx(t), "ns", n)
		if err != nil {
			t.Fatal(err)
		}
		revs[rev] = append(revs[rev], n)
	}
	if len(revs) != 1 {
		t.Fatalf("members bound at different revisions: %v", revs)
	}
}

// waitForRelease waits until members held assumptions and then none is
// left: a timeout came and released them all.
func waitForRelease(t *testing.T, st *store.Store) {
	t.Helper()
	eventually(t, 20*time.Second, "members waiting at Permit", func() error {
		as, err := st.ListAssumptions(tctx(t), "ns")
		if err != nil || len(as) == 0 {
			return fmt.Errorf("assumptions %v, %v", as, err)
		}
		return nil
	})
	eventually(t, 20*time.Second, "every assumption dropped", func() error {
		as, err := st.ListAssumptions(tctx(t), "ns")
		if err != nil || len(as) != 0 {
			return fmt.Errorf("assumptions %v, %v", as, err)
		}
		return nil
	})
}

func assertPending(t *testing.T, e *env, names ...string) {
	t.Helper()
	for _, n := range names {
		got, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: n})
		if err != nil {
			t.Fatal(err)
		}
		switch ph := got.GetPod().GetStatus().GetPhase(); {
		case got.GetPod().GetNodeName() != "":
			t.Errorf("%s is on %s", n, got.GetPod().GetNodeName())
		case ph != berthv1.PodPhase_POD_PHASE_PENDING && ph != berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE:
			t.Errorf("%s is %v, want pending", n, ph)
		}
	}
}

func TestPodGroupRPCs(t *testing.T) {
	e := newEnv(t)
	up, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: &berthv1.PodGroup{Namespace: "ns", Name: "g", MinMember: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if up.GetRevision() == 0 || up.GetPodGroup().GetScheduleTimeout().AsDuration() != time.Minute {
		t.Fatalf("upsert = %v, want a revision and the 60s default timeout", up)
	}
	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("h", 1, time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: gangPod("m1", "g", 100)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "member counted", func() error {
		got, err := e.pods.GetPodGroup(tctx(t), &berthv1.GetPodGroupRequest{Namespace: "ns", Name: "g"})
		if err != nil {
			return err
		}
		if got.GetPodGroup().GetMinMember() != 2 || got.GetMembers() != 1 || got.GetBound() != 0 {
			return fmt.Errorf("got %v, want min 2 with 1 member, 0 bound", got)
		}
		return nil
	})
	list, err := e.pods.ListPodGroups(tctx(t), &berthv1.ListPodGroupsRequest{Namespace: "ns"})
	if err != nil || len(list.GetPodGroups()) != 2 || list.GetPodGroups()[0].GetName() != "g" {
		t.Fatalf("list = %v, %v", list, err)
	}
	if _, err := e.pods.DeletePodGroup(tctx(t), &berthv1.DeletePodGroupRequest{Namespace: "ns", Name: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.GetPodGroup(tctx(t), &berthv1.GetPodGroupRequest{Namespace: "ns", Name: "g"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
	if _, err := e.pods.DeletePodGroup(tctx(t), &berthv1.DeletePodGroupRequest{Namespace: "ns", Name: "g"}); status.Code(err) != codes.NotFound {
		t.Fatalf("second delete: %v, want NotFound", err)
	}

	bad := []struct {
		name  string
		group *berthv1.PodGroup
		field string
	}{
		{"missing", nil, "pod_group"},
		{"min_member 0", podGroup("x", 0, time.Second), "pod_group.min_member"},
		{"negative timeout", podGroup("x", 1, -time.Second), "pod_group.schedule_timeout"},
		{"timeout past Permit's cap", podGroup("x", 1, time.Hour), "pod_group.schedule_timeout"},
		{"bad name", podGroup("X_1", 1, time.Second), "pod_group.name"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: tc.group})
			if fields := badFields(t, err); !slices.Contains(fields, tc.field) {
				t.Fatalf("violations %v do not name %q", fields, tc.field)
			}
		})
	}
	if _, err := e.pods.GetPodGroup(tctx(t), &berthv1.GetPodGroupRequest{Namespace: "ns"}); !slices.Contains(badFields(t, err), "name") {
		t.Fatalf("get without a name: %v", err)
	}
}

// A gang of three binds all three in one commit.
func TestGangBindsInOneRevision(t *testing.T) {
	e := newEnv(t)
	st := storeOf(t, e)
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("g", 3, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var pods []*berthv1.Pod
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, gangPod(n, "g", 100))
	}
	if _, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: pods}); err != nil {
		t.Fatal(err)
	}
	waitAllBoundTogether(t, e, st, "a", "b", "c")
	eventually(t, 10*time.Second, "group counts", func() error {
		got, err := e.pods.GetPodGroup(tctx(t), &berthv1.GetPodGroupRequest{Namespace: "ns", Name: "g"})
		if err != nil || got.GetMembers() != 3 || got.GetBound() != 3 {
			return fmt.Errorf("got %v, %v; want 3 members, 3 bound", got, err)
		}
		return nil
	})
	if as, err := st.ListAssumptions(tctx(t), ""); err != nil || len(as) != 0 {
		t.Fatalf("assumptions left after the bind: %v, %v", as, err)
	}
}

// A gang whose min_member cannot fit (one member fits nowhere) is never
// partly bound: the members that fit wait, are released, and all stay
// pending.
func TestGangThatCannotFitIsNeverPartlyBound(t *testing.T) {
	e := newEnv(t)
	st := storeOf(t, e)
	log := watchBindings(t, e)
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("g", 3, 200*time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	pods := []*berthv1.Pod{gangPod("a", "g", 100), gangPod("b", "g", 100), gangPod("huge", "g", 5000)}
	if _, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: pods}); err != nil {
		t.Fatal(err)
	}
	waitForRelease(t, st)
	waitForRelease(t, st) // and once more, after their backoff
	if got := log.boundOf("a", "b", "huge"); len(got) != 0 {
		t.Fatalf("bound: %v", got)
	}
	assertPending(t, e, "a", "b", "huge")
}

// Members that fit only partly wait, time out together (none bound, every
// assumption gone) and bind, together, once room appears.
func TestGangTimesOutThenBindsWhenRoomAppears(t *testing.T) {
	e := newEnv(t)
	st := storeOf(t, e)
	log := watchBindings(t, e)
	small := node("n1")
	small.Allocatable["cpu"] = 250 // two of three
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: small}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("g", 3, 300*time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	var pods []*berthv1.Pod
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, gangPod(n, "g", 100))
	}
	if _, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: pods}); err != nil {
		t.Fatal(err)
	}
	waitForRelease(t, st)
	if got := log.boundOf("a", "b", "c"); len(got) != 0 {
		t.Fatalf("bound before room appeared: %v", got)
	}
	assertPending(t, e, "a", "b", "c")

	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n2")}); err != nil {
		t.Fatal(err)
	}
	waitAllBoundTogether(t, e, st, "a", "b", "c")
	if as, err := st.ListAssumptions(tctx(t), ""); err != nil || len(as) != 0 {
		t.Fatalf("assumptions left after the bind: %v, %v", as, err)
	}
}

// A member of a group that does not exist yet waits; creating the group
// lets the gang bind.
func TestMembersOfAMissingGroupWaitForIt(t *testing.T) {
	e := newEnv(t)
	st := storeOf(t, e)
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	pods := []*berthv1.Pod{gangPod("a", "later", 100), gangPod("b", "later", 100)}
	if _, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: pods}); err != nil {
		t.Fatal(err)
	}
	// A pod submitted after them binds: the scheduler has seen the
	// members, and held them back.
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: pod("solo")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "solo bound", func() error {
		got, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "solo"})
		if err != nil || got.GetPod().GetNodeName() == "" {
			return fmt.Errorf("solo: %v, %v", got, err)
		}
		return nil
	})
	assertPending(t, e, "a", "b")

	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("later", 2, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	waitAllBoundTogether(t, e, st, "a", "b")
}

// Assumptions live with the replica's lease. When the lease is lost (as
// when the replica dies) they vanish, and the pods, still pending in
// etcd, are scheduled again by the shard's next owner: here the same
// replica, in a new session.
func TestGangAssumptionsGoWithTheLease(t *testing.T) {
	e := newEnv(t)
	st := storeOf(t, e)
	small := node("n1")
	small.Allocatable["cpu"] = 250 // two of three
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: small}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("g", 3, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var pods []*berthv1.Pod
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, gangPod(n, "g", 100))
	}
	if _, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: pods}); err != nil {
		t.Fatal(err)
	}
	var lease clientv3.LeaseID
	eventually(t, 20*time.Second, "two members waiting under the replica's lease", func() error {
		resp, err := st.Client().Get(tctx(t), "/berth/v1/assume/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 2 || resp.Kvs[0].Lease == 0 {
			return fmt.Errorf("%d assumptions (lease %v)", len(resp.Kvs), resp.Kvs)
		}
		lease = clientv3.LeaseID(resp.Kvs[0].Lease)
		return nil
	})
	if _, err := st.Client().Revoke(tctx(t), lease); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Client().Get(tctx(t), "/berth/v1/assume/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if clientv3.LeaseID(kv.Lease) == lease {
			t.Fatalf("assumption %s outlived its lease", kv.Key)
		}
	}
	assertPending(t, e, "a", "b", "c")

	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n2")}); err != nil {
		t.Fatal(err)
	}
	waitAllBoundTogether(t, e, st, "a", "b", "c")
	if as, err := st.ListAssumptions(tctx(t), ""); err != nil || len(as) != 0 {
		t.Fatalf("assumptions left after the bind: %v, %v", as, err)
	}
}
