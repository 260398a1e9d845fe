package replica_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// These tests wait on real backoffs and lease expiries, so they run in
// parallel, each with its own server and etcd.

const (
	phasePending  = berthv1.PodPhase_POD_PHASE_PENDING
	phaseBound    = berthv1.PodPhase_POD_PHASE_BOUND
	phaseRunning  = berthv1.PodPhase_POD_PHASE_RUNNING
	phaseUnsched  = berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE
	phaseSuccess  = berthv1.PodPhase_POD_PHASE_SUCCEEDED
	phaseFailed   = berthv1.PodPhase_POD_PHASE_FAILED
	eventNodeLost = berthv1.BindingEventType_BINDING_EVENT_TYPE_NODE_LOST
)

func (e *env) upsertNode(t *testing.T, n *berthv1.Node) int64 {
	t.Helper()
	resp, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetRevision()
}

// schedule submits a pod and waits for its decision.
func (e *env) schedule(t *testing.T, p *berthv1.Pod) *berthv1.Pod {
	t.Helper()
	resp, err := e.sched.Schedule(tctx(t), &berthv1.ScheduleRequest{Pod: p})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPod()
}

func (e *env) getPod(name string) (*berthv1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.pods.GetPod(ctx, &berthv1.GetPodRequest{Namespace: "ns", Name: name})
	return resp.GetPod(), err
}

// waitPod polls a pod until ok accepts it.
func (e *env) waitPod(t *testing.T, name, what string, ok func(*berthv1.Pod) error) *berthv1.Pod {
	t.Helper()
	var got *berthv1.Pod
	eventually(t, 20*time.Second, "pod "+name+": "+what, func() error {
		p, err := e.getPod(name)
		if err != nil {
			return err
		}
		got = p
		return ok(p)
	})
	return got
}

func boundTo(node string) func(*berthv1.Pod) error {
	return func(p *berthv1.Pod) error {
		if p.GetStatus().GetPhase() != phaseBound || p.GetNodeName() != node {
			return fmt.Errorf("phase %v on %q, want bound to %s", p.GetStatus().GetPhase(), p.GetNodeName(), node)
		}
		return nil
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want %v", what, err, code)
	}
}

// TestPodReports covers ConfirmBinding, RejectBinding and CompletePod on
// their own: outcomes, idempotency, and the codes of reports that cannot
// apply.
func TestPodReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.upsertNode(t, node("n1"))
	p := e.schedule(t, pod("p"))
	if p.GetNodeName() != "n1" {
		t.Fatalf("scheduled %v, want on n1", p)
	}
	uid := p.GetUid()

	// Confirm, twice: the second changes nothing.
	conf, err := e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p", Uid: uid, NodeName: "n1"})
	if err != nil || conf.GetPod().GetStatus().GetPhase() != phaseRunning {
		t.Fatalf("confirm = %v, %v; want running", conf.GetPod().GetStatus(), err)
	}
	again, err := e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p", Uid: uid})
	if err != nil || again.GetRevision() != conf.GetRevision() || again.GetPod().GetStatus().GetPhase() != phaseRunning {
		t.Fatalf("repeated confirm = %v at %d, %v; want the stored pod at %d", again.GetPod().GetStatus(), again.GetRevision(), err, conf.GetRevision())
	}
	_, err = e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p", Uid: uid, NodeName: "n2"})
	wantCode(t, "confirm on the wrong node", err, codes.FailedPrecondition)
	_, err = e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p", Uid: "stale"})
	wantCode(t, "confirm with a stale uid", err, codes.FailedPrecondition)
	_, err = e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "nope", Uid: uid})
	wantCode(t, "confirm of a missing pod", err, codes.NotFound)
	_, err = e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: uid, NodeName: "n2"})
	wantCode(t, "reject on the wrong node", err, codes.FailedPrecondition)
	_, err = e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: "stale"})
	wantCode(t, "reject with a stale uid", err, codes.FailedPrecondition)

	// A gated pod stays pending: it cannot be confirmed or rejected, but
	// it can be given up on.
	gated := pod("gated")
	gated.SchedulingGates = []string{"example.com/hold"}
	sub, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: gated})
	if err != nil {
		t.Fatal(err)
	}
	gatedUID := sub.GetPod().GetUid()
	_, err = e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "gated", Uid: gatedUID})
	wantCode(t, "confirm of a pending pod", err, codes.FailedPrecondition)
	_, err = e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "gated", Uid: gatedUID, Reason: "no"})
	wantCode(t, "reject of a pending pod", err, codes.FailedPrecondition)
	gave, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "gated", Uid: gatedUID, Phase: phaseFailed, Message: "cancelled"})
	if err != nil || gave.GetPod().GetStatus().GetPhase() != phaseFailed || gave.GetPod().GetStatus().GetMessage() != "cancelled" {
		t.Fatalf("complete of a pending pod = %v, %v; want FAILED, cancelled", gave.GetPod().GetStatus(), err)
	}

	// Complete, twice; then a different outcome is refused.
	done, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "p", Uid: uid, Phase: phaseSuccess})
	if err != nil || done.GetPod().GetStatus().GetPhase() != phaseSuccess || done.GetPod().GetNodeName() != "n1" {
		t.Fatalf("complete = %v, %v; want SUCCEEDED, still naming n1", done.GetPod(), err)
	}
	doneAgain, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "p", Uid: uid, Phase: phaseSuccess})
	if err != nil || doneAgain.GetRevision() != done.GetRevision() {
		t.Fatalf("repeated complete = %d, %v; want the stored pod at %d", doneAgain.GetRevision(), err, done.GetRevision())
	}
	_, err = e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "p", Uid: uid, Phase: phaseFailed})
	wantCode(t, "complete with another outcome", err, codes.FailedPrecondition)
	_, err = e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: uid})
	wantCode(t, "reject of a finished pod", err, codes.FailedPrecondition)
	_, err = e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p", Uid: uid})
	wantCode(t, "confirm of a finished pod", err, codes.FailedPrecondition)
}

func TestPodReportsNameBadFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"confirm without uid", func() error {
			_, err := e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p"})
			return err
		}, "uid"},
		{"confirm on a bad node name", func() error {
			_, err := e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "p", Uid: "u", NodeName: "Bad_Node"})
			return err
		}, "node_name"},
		{"reject without uid", func() error {
			_, err := e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Reason: "x"})
			return err
		}, "uid"},
		{"reject with an over-long reason", func() error {
			_, err := e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: "u", Reason: strings.Repeat("x", 2000)})
			return err
		}, "reason"},
		{"complete without uid", func() error {
			_, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "p", Phase: phaseSuccess})
			return err
		}, "uid"},
		{"complete as running", func() error {
			_, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "p", Uid: "u", Phase: phaseRunning})
			return err
		}, "phase"},
		{"complete without phase", func() error {
			_, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "p", Uid: "u"})
			return err
		}, "phase"},
		{"complete in a bad namespace", func() error {
			_, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "a.b", Name: "p", Uid: "u", Phase: phaseFailed})
			return err
		}, "namespace"},
		{"renew without name", func() error {
			_, err := e.cluster.RenewNodeLease(tctx(t), &berthv1.RenewNodeLeaseRequest{})
			return err
		}, "name"},
		{"lease TTL too long", func() error {
			n := node("n1")
			n.LeaseTtlSeconds = 5000
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: n})
			return err
		}, "node.lease_ttl_seconds"},
		{"negative lease TTL", func() error {
			n := node("n1")
			n.LeaseTtlSeconds = -1
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: n})
			return err
		}, "node.lease_ttl_seconds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if fields := badFields(t, tc.call()); !slices.Contains(fields, tc.field) {
				t.Fatalf("violations %v do not name %q", fields, tc.field)
			}
		})
	}
	_, err := e.cluster.RenewNodeLease(tctx(t), &berthv1.RenewNodeLeaseRequest{Name: "nope"})
	wantCode(t, "renew of a missing node", err, codes.NotFound)
	e.upsertNode(t, node("plain"))
	_, err = e.cluster.RenewNodeLease(tctx(t), &berthv1.RenewNodeLeaseRequest{Name: "plain"})
	wantCode(t, "renew of a node without lease", err, codes.FailedPrecondition)
}

// TestRejectedPodAvoidsTheNode: a rejected pod leaves its node, is placed
// on another after a backoff, and does not return to a node that rejected
// it until that node's record changes.
func TestRejectedPodAvoidsTheNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n1Rev := e.upsertNode(t, node("n1"))
	p := e.schedule(t, pod("p"))
	if p.GetNodeName() != "n1" {
		t.Fatalf("scheduled on %q, want n1", p.GetNodeName())
	}
	e.upsertNode(t, node("n2"))
	watch, err := e.sched.WatchBindings(tctx(t), &berthv1.WatchBindingsRequest{FromRevision: n1Rev})
	if err != nil {
		t.Fatal(err)
	}

	rej, err := e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: p.GetUid(), NodeName: "n1", Reason: "image pull failed"})
	if err != nil {
		t.Fatal(err)
	}
	st := rej.GetPod().GetStatus()
	if rej.GetPod().GetNodeName() != "" || st.GetPhase() != phasePending || len(st.GetRejections()) != 1 ||
		st.GetRejections()[0].GetNodeName() != "n1" || st.GetRejections()[0].GetNodeRevision() != n1Rev || st.GetRejections()[0].GetReason() != "image pull failed" {
		t.Fatalf("after reject: node %q, status %v; want pending with n1's rejection at revision %d", rej.GetPod().GetNodeName(), st, n1Rev)
	}
	again, err := e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: p.GetUid(), NodeName: "n1", Reason: "image pull failed"})
	if err != nil || again.GetRevision() != rej.GetRevision() {
		t.Fatalf("repeated reject = %d, %v; want the stored pod at %d", again.GetRevision(), err, rej.GetRevision())
	}
	// Subscribers learn why the pod left its node.
	for {
		msg, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev := msg.GetEvent(); ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND {
			if ev.GetName() != "p" || ev.GetNodeName() != "n1" || ev.GetMessage() != "image pull failed" {
				t.Fatalf("UNBOUND %v, want p off n1 with the reason", ev)
			}
			break
		}
	}
	// n1's room is free at once; the pod lands on n2 after its backoff.
	eventually(t, 10*time.Second, "n1 emptied", func() error {
		n, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "n1"})
		if err != nil || n.GetUsage().GetPodCount() != 0 {
			return fmt.Errorf("usage %v, %v", n.GetUsage(), err)
		}
		return nil
	})
	e.waitPod(t, "p", "bound to n2", boundTo("n2"))

	// Rejected by n2 as well: neither node takes it while unchanged.
	if _, err := e.pods.RejectBinding(tctx(t), &berthv1.RejectBindingRequest{Namespace: "ns", Name: "p", Uid: p.GetUid(), NodeName: "n2", Reason: "disk full"}); err != nil {
		t.Fatal(err)
	}
	e.waitPod(t, "p", "unschedulable, every node having rejected it", func(p *berthv1.Pod) error {
		st := p.GetStatus()
		if st.GetPhase() != phaseUnsched {
			return fmt.Errorf("phase %v on %q", st.GetPhase(), p.GetNodeName())
		}
		for _, r := range st.GetDiagnosis().GetReasons() {
			if r.GetPlugin() == "RejectedNodes" && r.GetNodeCount() == 2 {
				if len(st.GetRejections()) != 2 {
					return fmt.Errorf("rejections %v, want both kept", st.GetRejections())
				}
				return nil
			}
		}
		return fmt.Errorf("diagnosis %v lacks RejectedNodes on 2 nodes", st.GetDiagnosis())
	})
	// The same spec upserted again is a new record: n1 may try again.
	e.upsertNode(t, node("n1"))
	e.waitPod(t, "p", "bound to n1 again", boundTo("n1"))
}

// TestCompletedPodFreesItsRoom: a pod waiting for room binds once the pod
// holding it finishes.
func TestCompletedPodFreesItsRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.upsertNode(t, node("n1"))
	big := func(name string) *berthv1.Pod {
		p := pod(name)
		p.Containers[0].Requests["cpu"] = 800
		p.PreemptionPolicy = berthv1.PreemptionPolicy_PREEMPTION_POLICY_NEVER
		return p
	}
	first := e.schedule(t, big("first"))
	if first.GetNodeName() != "n1" {
		t.Fatalf("first on %q, want n1", first.GetNodeName())
	}
	if second := e.schedule(t, big("second")); second.GetStatus().GetPhase() != phaseUnsched {
		t.Fatalf("second = %v, want unschedulable while first holds the room", second.GetStatus())
	}
	if _, err := e.pods.ConfirmBinding(tctx(t), &berthv1.ConfirmBindingRequest{Namespace: "ns", Name: "first", Uid: first.GetUid()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.CompletePod(tctx(t), &berthv1.CompletePodRequest{Namespace: "ns", Name: "first", Uid: first.GetUid(), Phase: phaseSuccess}); err != nil {
		t.Fatal(err)
	}
	e.waitPod(t, "second", "bound to n1", boundTo("n1"))
}

// TestNodeLeaseExpiry: a node that stops renewing its lease becomes
// unreachable, takes no new pods (but those tolerating the taint), its pods
// are marked lost and subscribers told; renewal brings it back.
// Long on purpose: one scenario, read top to bottom.
func TestNodeLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	leased := node("leased")
	leased.Labels = map[string]string{"pool": "edge"}
	leased.LeaseTtlSeconds = 2
	e.upsertNode(t, leased)
	e.upsertNode(t, node("plain"))
	onEdge := func(name string) *berthv1.Pod {
		p := pod(name)
		p.NodeSelector = map[string]string{"pool": "edge"}
		return p
	}
	a := e.schedule(t, onEdge("a"))
	if a.GetNodeName() != "leased" {
		t.Fatalf("a on %q, want leased", a.GetNodeName())
	}
	renew, err := e.cluster.RenewNodeLease(tctx(t), &berthv1.RenewNodeLeaseRequest{Name: "leased"})
	if err != nil || renew.GetRestored() || renew.GetTtlSeconds() < 1 {
		t.Fatalf("renew = %v, %v; want a live lease", renew, err)
	}
	ready, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "leased"})
	if err != nil || ready.GetNode().GetUnreachable() {
		t.Fatalf("GetNode = %v, %v; want reachable", ready.GetNode(), err)
	}
	watchCtx, cancelWatch := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelWatch()
	watch, err := e.sched.WatchBindings(watchCtx, &berthv1.WatchBindingsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	// No more renewals: the lease runs out.
	eventually(t, 20*time.Second, "leased unreachable", func() error {
		n, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "leased"})
		if err != nil || !n.GetNode().GetUnreachable() {
			return fmt.Errorf("node %v, %v", n.GetNode(), err)
		}
		return nil
	})
	list, err := e.cluster.ListNodes(tctx(t), &berthv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.GetNodes() {
		if n.GetUnreachable() != (n.GetName() == "leased") {
			t.Errorf("ListNodes: %s unreachable = %v", n.GetName(), n.GetUnreachable())
		}
	}
	e.waitPod(t, "a", "marked node_lost", func(p *berthv1.Pod) error {
		if !p.GetStatus().GetNodeLost() || p.GetNodeName() != "leased" {
			return fmt.Errorf("status %v on %q", p.GetStatus(), p.GetNodeName())
		}
		return nil
	})
	var nodeLost, podLost *berthv1.BindingEvent
	for nodeLost == nil || podLost == nil {
		msg, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v (node event %v, pod event %v)", err, nodeLost, podLost)
		}
		ev := msg.GetEvent()
		if ev.GetType() != eventNodeLost {
			continue
		}
		if ev.GetName() == "" {
			nodeLost = ev
		} else {
			podLost = ev
		}
	}
	if nodeLost.GetNodeName() != "leased" || nodeLost.GetNamespace() != "" || nodeLost.GetMessage() == "" {
		t.Errorf("node event %v, want NODE_LOST for leased with a message", nodeLost)
	}
	if podLost.GetName() != "a" || podLost.GetNodeName() != "leased" || podLost.GetUid() != a.GetUid() || podLost.GetRevision() <= nodeLost.GetRevision() {
		t.Errorf("pod event %v, want NODE_LOST for a on leased after %d", podLost, nodeLost.GetRevision())
	}

	// No new pod lands there, except one that tolerates unreachable nodes.
	b := e.schedule(t, onEdge("b"))
	if st := b.GetStatus(); st.GetPhase() != phaseUnsched || !strings.Contains(st.GetMessage(), "node.berth.io/unreachable") {
		t.Fatalf("b = %v on %q, want unschedulable for the unreachable taint", st, b.GetNodeName())
	}
	tolerant := onEdge("tolerant")
	tolerant.Tolerations = []*berthv1.Toleration{{Key: "node.berth.io/unreachable", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS}}
	if got := e.schedule(t, tolerant); got.GetNodeName() != "leased" {
		t.Fatalf("tolerant pod = %v on %q, want bound to leased", got.GetStatus(), got.GetNodeName())
	}

	// Renewal restores the node; the waiting pod goes there. The lost mark
	// stays for the orchestrator to act on.
	renew, err = e.cluster.RenewNodeLease(tctx(t), &berthv1.RenewNodeLeaseRequest{Name: "leased"})
	if err != nil || !renew.GetRestored() {
		t.Fatalf("renew after expiry = %v, %v; want restored", renew, err)
	}
	back, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "leased"})
	if err != nil || back.GetNode().GetUnreachable() {
		t.Fatalf("GetNode after renewal = %v, %v; want reachable", back.GetNode(), err)
	}
	e.waitPod(t, "b", "bound to leased", boundTo("leased"))
	if p, err := e.getPod("a"); err != nil || !p.GetStatus().GetNodeLost() {
		t.Fatalf("a after renewal: %v, %v; want node_lost kept", p.GetStatus(), err)
	}
}
