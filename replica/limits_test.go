package replica_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

const maxInt64 = int64(^uint64(0) >> 1)

// TestHostileRequestsAreRefused sends the requests of issue 12 that once
// corrupted node accounting, stored unknown enums or reached etcd unbounded:
// each must be InvalidArgument naming the field, and leave the node's usage
// exactly as it was, with an ordinary pod still scheduling afterwards.
// Long on purpose: one table holding a case per hostile request.
func TestHostileRequestsAreRefused(t *testing.T) {
	e := newEnv(t)
	full := node("full")
	full.Allocatable = map[string]int64{"cpu": 1000, "memory": 1 << 30, "pods": 10}
	e.upsertNode(t, full)
	filler := pod("filler")
	filler.Containers[0].Requests = map[string]int64{"cpu": 1000}
	e.schedule(t, filler)
	e.waitPod(t, "filler", "bound", boundTo("full"))
	usageBefore := e.usage(t, "full")

	withPod := func(f func(p *berthv1.Pod)) *berthv1.Pod { p := pod("hostile"); f(p); return p }
	twoContainers := func(q int64) *berthv1.Pod {
		return withPod(func(p *berthv1.Pod) {
			p.Containers = []*berthv1.Container{
				{Name: "a", Requests: map[string]int64{"cpu": q}},
				{Name: "b", Requests: map[string]int64{"cpu": q}},
			}
		})
	}
	submit := func(p *berthv1.Pod) func() error {
		return func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: p})
			return err
		}
	}
	manyTolerations := withPod(func(p *berthv1.Pod) {
		for range 100_000 {
			p.Tolerations = append(p.Tolerations, &berthv1.Toleration{Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS})
		}
	})
	manyAntiAffinity := withPod(func(p *berthv1.Pod) {
		p.Affinity = &berthv1.Affinity{PodAntiAffinity: &berthv1.PodAntiAffinity{}}
		for range 5000 {
			p.Affinity.PodAntiAffinity.Required = append(p.Affinity.PodAntiAffinity.Required, &berthv1.PodAffinityTerm{TopologyKey: "zone"})
		}
	})
	manyNodeTerms := withPod(func(p *berthv1.Pod) {
		sel := &berthv1.NodeSelector{}
		for range 3000 {
			term := &berthv1.NodeSelectorTerm{}
			for range 20 {
				term.MatchExpressions = append(term.MatchExpressions, &berthv1.NodeSelectorRequirement{
					Key: "zone", Operator: berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_EXISTS,
				})
			}
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, term)
		}
		p.Affinity = &berthv1.Affinity{NodeAffinity: &berthv1.NodeAffinity{Required: sel}}
	})

	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		// Case 1: quantities that overflow int64 once summed.
		{"two MaxInt64 containers", submit(twoContainers(maxInt64)), "pod.containers[0].requests[cpu]"},
		{"two containers summing to -2^63", submit(twoContainers(1 << 62)), "pod.containers[0].requests[cpu]"},
		{"overhead past the cap", submit(withPod(func(p *berthv1.Pod) {
			p.Containers[0].Requests = map[string]int64{"cpu": 1 << 53}
			p.Overhead = map[string]int64{"cpu": 10}
		})), "pod"},
		{"init container past the cap", submit(withPod(func(p *berthv1.Pod) {
			p.InitContainers = []*berthv1.Container{{Name: "init", Requests: map[string]int64{"cpu": maxInt64}}}
		})), "pod.init_containers[0].requests[cpu]"},
		{"Schedule with an overflowing pod", func() error {
			_, err := e.sched.Schedule(tctx(t), &berthv1.ScheduleRequest{Pod: twoContainers(maxInt64)})
			return err
		}, "pod.containers[0].requests[cpu]"},
		{"Explain with an overflowing pod", func() error {
			_, err := e.sched.Explain(tctx(t), &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Pod{Pod: twoContainers(maxInt64)}})
			return err
		}, "pod.containers[0].requests[cpu]"},
		{"allocatable past the cap", func() error {
			n := node("huge")
			n.Allocatable["cpu"] = maxInt64
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: n})
			return err
		}, "node.allocatable[cpu]"},

		// Case 2: enum numbers the API does not define.
		{"preemption policy 99", submit(withPod(func(p *berthv1.Pod) { p.PreemptionPolicy = 99 })), "pod.preemption_policy"},
		{"toleration operator 77", submit(withPod(func(p *berthv1.Pod) {
			p.Tolerations = []*berthv1.Toleration{{Key: "k", Operator: 77}}
		})), "pod.tolerations[0].operator"},
		{"when_unsatisfiable 42", submit(withPod(func(p *berthv1.Pod) {
			p.TopologySpreadConstraints = []*berthv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: 42}}
		})), "pod.topology_spread_constraints[0].when_unsatisfiable"},

		// Case 3: unbounded fields.
		{"100,000 tolerations", submit(manyTolerations), "pod.tolerations"},
		{"4 MB toleration value with NUL", submit(withPod(func(p *berthv1.Pod) {
			p.Tolerations = []*berthv1.Toleration{{Key: "k", Value: strings.Repeat("v", 4<<20) + "\x00"}}
		})), "pod.tolerations[0].value"},
		{"NUL in a short toleration value", submit(withPod(func(p *berthv1.Pod) {
			p.Tolerations = []*berthv1.Toleration{{Key: "k", Value: "a\x00b"}}
		})), "pod.tolerations[0].value"},
		{"5,000 anti-affinity terms", submit(manyAntiAffinity), "pod.affinity.pod_anti_affinity.required"},
		{"3,000 node selector terms", submit(manyNodeTerms), "pod.affinity.node_affinity.required.node_selector_terms"},
		{"10 MB image name", submit(withPod(func(p *berthv1.Pod) { p.Containers[0].Image = strings.Repeat("i", 10<<20) })), "pod.containers[0].image"},
		{"a bad pod in SubmitPods", func() error {
			resp, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: []*berthv1.Pod{withPod(func(p *berthv1.Pod) { p.PreemptionPolicy = 99 })}})
			if err != nil {
				return err
			}
			r := resp.GetResults()[0]
			return status.Error(codes.Code(r.GetCode()), r.GetMessage())
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.field == "" {
				// SubmitPods answers per pod, in a code and a message.
				wantCode(t, tc.name, err, codes.InvalidArgument)
				if !strings.Contains(status.Convert(err).Message(), "pod.preemption_policy") {
					t.Fatalf("message %q does not name pod.preemption_policy", status.Convert(err).Message())
				}
				return
			}
			if fields := badFields(t, err); !slices.Contains(fields, tc.field) {
				t.Fatalf("violations name %v, want %s", fields, tc.field)
			}
		})
	}

	if _, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "hostile"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused pod was stored: %v", err)
	}
	if _, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "huge"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused node was stored: %v", err)
	}
	if got := e.usage(t, "full"); got != usageBefore {
		t.Fatalf("usage of full moved from %s to %s", usageBefore, got)
	}
	e.upsertNode(t, node("fresh"))
	e.schedule(t, pod("ordinary"))
	e.waitPod(t, "ordinary", "bound to fresh", boundTo("fresh"))
}

// usage renders a node's usage so it compares exactly.
func (e *env) usage(t *testing.T, name string) string {
	t.Helper()
	resp, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	u := resp.GetUsage()
	keys := make([]string, 0, len(u.GetRequested()))
	for k := range u.GetRequested() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "pods=%d", u.GetPodCount())
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, u.GetRequested()[k])
	}
	return b.String()
}

// TestPodUIDsAreUnique: a client-chosen uid names one pod at most, the very
// same pod resubmitted is still accepted as before, and deleting the pod
// frees its uid.
func TestPodUIDsAreUnique(t *testing.T) {
	e := newEnv(t)
	first := pod("first")
	first.Uid = "uid-1"
	resp, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: first})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: first})
	if err != nil {
		t.Fatalf("identical resubmission: %v", err)
	}
	if again.GetRevision() != resp.GetRevision() || again.GetPod().GetUid() != "uid-1" {
		t.Fatalf("resubmission answered %v at %d, want the stored pod at %d", again.GetPod(), again.GetRevision(), resp.GetRevision())
	}

	rival := pod("rival")
	rival.Uid = "uid-1"
	_, err = e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: rival})
	wantCode(t, "a second pod with the uid", err, codes.AlreadyExists)
	if !strings.Contains(status.Convert(err).Message(), "pod.uid") {
		t.Fatalf("message %q does not name pod.uid", status.Convert(err).Message())
	}
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetMetadata()["field"] != "pod.uid" || info.GetMetadata()["holder"] != "ns/first" {
		t.Fatalf("error info %v, want field pod.uid held by ns/first", info)
	}
	if _, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "rival"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the rival was stored: %v", err)
	}

	// Two pods of one batch with one uid: exactly one is created.
	a, b := pod("twin-a"), pod("twin-b")
	a.Uid, b.Uid = "uid-2", "uid-2"
	batch, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: []*berthv1.Pod{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	var created, refused int
	for _, r := range batch.GetResults() {
		switch codes.Code(r.GetCode()) {
		case codes.OK:
			created++
		case codes.AlreadyExists:
			refused++
		}
	}
	if created != 1 || refused != 1 {
		t.Fatalf("batch of twins: %d created, %d refused, want 1 and 1: %v", created, refused, batch.GetResults())
	}

	if _, err := e.pods.DeletePod(tctx(t), &berthv1.DeletePodRequest{Namespace: "ns", Name: "first"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: rival}); err != nil {
		t.Fatalf("the uid is free once its pod is deleted: %v", err)
	}
}

// TestMissingPodGroupIsNamedInTheStatus: a member of a group that does not
// exist says so where GetPod shows it, and binds once the group appears.
func TestMissingPodGroupIsNamedInTheStatus(t *testing.T) {
	e := newEnv(t)
	e.upsertNode(t, node("n1"))
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: gangPod("member", "absent", 100)}); err != nil {
		t.Fatal(err)
	}
	want := `waiting for pod group "absent", which does not exist`
	e.waitPod(t, "member", "status names the missing group", func(p *berthv1.Pod) error {
		if p.GetStatus().GetMessage() != want {
			return fmt.Errorf("phase %v, message %q, want %q", p.GetStatus().GetPhase(), p.GetStatus().GetMessage(), want)
		}
		return nil
	})
	if _, err := e.pods.UpsertPodGroup(tctx(t), &berthv1.UpsertPodGroupRequest{PodGroup: podGroup("absent", 1, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e.waitPod(t, "member", "bound once the group exists", boundTo("n1"))
}
