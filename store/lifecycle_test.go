package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

const (
	unspecified   = berthv1.PodPhase_POD_PHASE_UNSPECIFIED
	pending       = berthv1.PodPhase_POD_PHASE_PENDING
	unschedulable = berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE
	bound         = berthv1.PodPhase_POD_PHASE_BOUND
	running       = berthv1.PodPhase_POD_PHASE_RUNNING
	succeeded     = berthv1.PodPhase_POD_PHASE_SUCCEEDED
	failed        = berthv1.PodPhase_POD_PHASE_FAILED
)

var allPhases = []berthv1.PodPhase{unspecified, pending, unschedulable, bound, running, succeeded, failed}

// storedPod is a pod as stored in phase: on node n1 when the phase holds a
// node, with one earlier rejection by n0.
func storedPod(phase berthv1.PodPhase) *berthv1.Pod {
	p := &berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u1", Status: &berthv1.PodStatus{
		Phase:      phase,
		Message:    "before",
		Rejections: []*berthv1.NodeRejection{{NodeName: "n0", NodeRevision: 3}},
	}}
	if HoldsNode(phase) {
		p.NodeName = "n1"
	}
	return p
}

// outcome is what a report transition did: wrote, was a no-op, or was
// refused.
type outcome string

const (
	wrote   outcome = "write"
	noop    outcome = "no-op"
	refused outcome = "refused"
)

func outcomeOf(t *testing.T, write bool, err error) outcome {
	t.Helper()
	switch {
	case err != nil:
		var te *TransitionError
		if !errors.As(err, &te) {
			t.Fatalf("refusal is %T %v, want *TransitionError", err, err)
		}
		if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || st.Message() != err.Error() {
			t.Fatalf("refusal's status is %v %q, want FailedPrecondition %q", st.Code(), st.Message(), err.Error())
		}
		return refused
	case write:
		return wrote
	}
	return noop
}

func TestPhasePredicates(t *testing.T) {
	holds := map[berthv1.PodPhase]bool{bound: true, running: true}
	finished := map[berthv1.PodPhase]bool{succeeded: true, failed: true}
	undecided := map[berthv1.PodPhase]bool{unspecified: true, pending: true}
	awaits := map[berthv1.PodPhase]bool{unspecified: true, pending: true, unschedulable: true}
	for _, ph := range allPhases {
		if got := Decided(ph); got != !undecided[ph] {
			t.Errorf("Decided(%v) = %v, want %v", ph, got, !undecided[ph])
		}
		if got := AwaitsPlacement(ph); got != awaits[ph] {
			t.Errorf("AwaitsPlacement(%v) = %v, want %v", ph, got, awaits[ph])
		}
		if got := HoldsNode(ph); got != holds[ph] {
			t.Errorf("HoldsNode(%v) = %v, want %v", ph, got, holds[ph])
		}
		if got := Finished(ph); got != finished[ph] {
			t.Errorf("Finished(%v) = %v, want %v", ph, got, finished[ph])
		}
		p := storedPod(ph)
		if got := holdsNode(p); got != holds[ph] {
			t.Errorf("holdsNode(pod %v on %q) = %v, want %v", ph, p.NodeName, got, holds[ph])
		}
		p.NodeName = ""
		if holdsNode(p) {
			t.Errorf("holdsNode(pod %v without node) = true", ph)
		}
		p.NodeName = "n1"
		if got, want := chargesOnCreate(p), !finished[ph]; got != want {
			t.Errorf("chargesOnCreate(pod %v on n1) = %v, want %v", ph, got, want)
		}
		p.NodeName = ""
		if chargesOnCreate(p) {
			t.Errorf("chargesOnCreate(pod %v without node) = true", ph)
		}
	}
	if holdsNode(nil) {
		t.Error("holdsNode(nil) = true")
	}
}

func TestAdmit(t *testing.T) {
	now := time.Unix(1700000000, 0)
	in := storedPod(running)
	in.Uid = ""
	in.NodeName = ""
	orig := proto.Clone(in)
	got := Admit(in, now)
	if !proto.Equal(in, orig) {
		t.Error("Admit modified its argument")
	}
	want := &berthv1.Pod{Namespace: "ns", Name: "p", Status: &berthv1.PodStatus{Phase: pending}}
	if !proto.Equal(got, want) {
		t.Errorf("Admit without node = %v, want %v", got, want)
	}

	in.NodeName = "n1"
	got = Admit(in, now)
	want = &berthv1.Pod{Namespace: "ns", Name: "p", NodeName: "n1", Status: &berthv1.PodStatus{Phase: bound}}
	if !got.GetStatus().GetStartTime().AsTime().Equal(now) {
		t.Errorf("Admit with node: start time %v, want %v", got.GetStatus().GetStartTime().AsTime(), now)
	}
	got.Status.StartTime = nil
	if !proto.Equal(got, want) {
		t.Errorf("Admit with node = %v, want %v", got, want)
	}
}

func TestWithCreateDefaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pod       *berthv1.Pod
		wantPhase berthv1.PodPhase
		same      bool // nothing missing: p itself comes back
	}{
		{"no status", &berthv1.Pod{Name: "p"}, pending, false},
		{"no status, on a node", &berthv1.Pod{Name: "p", NodeName: "n1"}, bound, false},
		{"phase kept, uid missing", &berthv1.Pod{Name: "p", Status: &berthv1.PodStatus{Phase: running}}, running, false},
		{"phase missing, uid kept", &berthv1.Pod{Name: "p", Uid: "u", Status: &berthv1.PodStatus{}}, pending, false},
		{"complete", &berthv1.Pod{Name: "p", Uid: "u", Status: &berthv1.PodStatus{Phase: unschedulable}}, unschedulable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := proto.Clone(tc.pod)
			got := withCreateDefaults(tc.pod)
			if (got == tc.pod) != tc.same {
				t.Errorf("returned its argument: %v, want %v", got == tc.pod, tc.same)
			}
			if !tc.same && !proto.Equal(tc.pod, orig) {
				t.Error("modified its argument")
			}
			if got.GetStatus().GetPhase() != tc.wantPhase {
				t.Errorf("phase %v, want %v", got.GetStatus().GetPhase(), tc.wantPhase)
			}
			if got.Uid == "" || (tc.pod.Uid != "" && got.Uid != tc.pod.Uid) {
				t.Errorf("uid %q (given %q)", got.Uid, tc.pod.Uid)
			}
		})
	}
}

// TestReportTransitions walks every stored phase through every
// orchestrator report and checks which are allowed, which are no-ops and
// which are refused, and what an allowed one leaves.
func TestReportTransitions(t *testing.T) {
	now := time.Unix(1700000000, 0)
	nodeRev := func(node string) (int64, error) {
		if node != "n1" {
			return 0, fmt.Errorf("node revision of %q asked", node)
		}
		return 42, nil
	}
	type report struct {
		name string
		do   func(p *berthv1.Pod) (bool, error)
		// want per stored phase; a phase not listed is refused.
		want map[berthv1.PodPhase]outcome
		// after is the phase an allowed write leaves.
		after berthv1.PodPhase
		// setup, if set, adjusts the stored pod first.
		setup func(p *berthv1.Pod)
	}
	clearRejections := func(p *berthv1.Pod) { p.Status.Rejections = nil }
	reports := []report{
		{"confirm", func(p *berthv1.Pod) (bool, error) { return MarkRunning(p, "") },
			map[berthv1.PodPhase]outcome{bound: wrote, running: noop}, running, nil},
		{"confirm on its node", func(p *berthv1.Pod) (bool, error) { return MarkRunning(p, p.NodeName) },
			map[berthv1.PodPhase]outcome{bound: wrote, running: noop}, running, nil},
		{"confirm on another node", func(p *berthv1.Pod) (bool, error) { return MarkRunning(p, "n9") },
			map[berthv1.PodPhase]outcome{}, running, nil},
		// A pod off any node that carries a rejection (storedPod's, by n0)
		// took a rejection naming no node already.
		{"reject", func(p *berthv1.Pod) (bool, error) { return MarkRejected(p, "", "no disk", now, nodeRev) },
			map[berthv1.PodPhase]outcome{unspecified: noop, pending: noop, unschedulable: noop, bound: wrote, running: wrote, succeeded: noop, failed: noop}, pending, nil},
		{"reject, never rejected before", func(p *berthv1.Pod) (bool, error) { return MarkRejected(p, "", "no disk", now, nodeRev) },
			map[berthv1.PodPhase]outcome{bound: wrote, running: wrote}, pending, clearRejections},
		{"reject on its node", func(p *berthv1.Pod) (bool, error) { return MarkRejected(p, p.NodeName, "no disk", now, nodeRev) },
			map[berthv1.PodPhase]outcome{unspecified: noop, pending: noop, unschedulable: noop, bound: wrote, running: wrote, succeeded: noop, failed: noop}, pending, nil},
		{"reject by the node that rejected it", func(p *berthv1.Pod) (bool, error) { return MarkRejected(p, "n0", "no disk", now, nodeRev) },
			map[berthv1.PodPhase]outcome{unspecified: noop, pending: noop, unschedulable: noop, succeeded: noop, failed: noop}, pending, nil},
		{"reject on another node", func(p *berthv1.Pod) (bool, error) { return MarkRejected(p, "n9", "no disk", now, nodeRev) },
			map[berthv1.PodPhase]outcome{}, pending, nil},
		{"complete succeeded", func(p *berthv1.Pod) (bool, error) { return MarkFinished(p, succeeded, "done") },
			map[berthv1.PodPhase]outcome{unspecified: wrote, pending: wrote, unschedulable: wrote, bound: wrote, running: wrote, succeeded: noop}, succeeded, nil},
		{"complete failed", func(p *berthv1.Pod) (bool, error) { return MarkFinished(p, failed, "done") },
			map[berthv1.PodPhase]outcome{unspecified: wrote, pending: wrote, unschedulable: wrote, bound: wrote, running: wrote, failed: noop}, failed, nil},
	}
	for _, r := range reports {
		for _, from := range allPhases {
			t.Run(fmt.Sprintf("%s from %v", r.name, from), func(t *testing.T) {
				p := storedPod(from)
				if r.setup != nil {
					r.setup(p)
				}
				orig := proto.Clone(p).(*berthv1.Pod)
				want, ok := r.want[from]
				if !ok {
					want = refused
				}
				write, err := r.do(p)
				if got := outcomeOf(t, write, err); got != want {
					t.Fatalf("outcome %s (err %v), want %s", got, err, want)
				}
				if want != wrote {
					if !proto.Equal(p, orig) {
						t.Errorf("pod changed without a write: %v", p)
					}
					return
				}
				if got := p.GetStatus().GetPhase(); got != r.after {
					t.Errorf("phase %v after, want %v", got, r.after)
				}
			})
		}
	}
}

func TestMarkRejected(t *testing.T) {
	now := time.Unix(1700000000, 0)
	nodeRev := func(string) (int64, error) { return 42, nil }
	p := storedPod(running)
	p.Status.PreemptedBy, p.Status.NodeLost, p.Status.ScheduledBy = "ns/q", true, "r1"
	if _, err := MarkRejected(p, "n1", "", now, nodeRev); err != nil {
		t.Fatal(err)
	}
	want := &berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u1", Status: &berthv1.PodStatus{
		Phase:   pending,
		Message: "node n1 could not start the pod: rejected by the orchestrator",
		Rejections: []*berthv1.NodeRejection{
			{NodeName: "n0", NodeRevision: 3},
			{NodeName: "n1", NodeRevision: 42, Reason: "rejected by the orchestrator", Time: p.GetStatus().GetRejections()[1].GetTime()},
		},
	}}
	if !proto.Equal(p, want) {
		t.Errorf("rejected pod = %v, want %v", p, want)
	}
	if !p.GetStatus().GetRejections()[1].GetTime().AsTime().Equal(now) {
		t.Errorf("rejection time %v, want %v", p.GetStatus().GetRejections()[1].GetTime().AsTime(), now)
	}

	// The same report again finds the pod pending without a node: a no-op,
	// as is a report that names no node; another node's is refused.
	for _, node := range []string{"n1", ""} {
		if write, err := MarkRejected(p, node, "again", now, nodeRev); write || err != nil {
			t.Errorf("repeated rejection on %q: write %v, err %v; want a no-op", node, write, err)
		}
	}
	if _, err := MarkRejected(p, "n7", "again", now, nodeRev); outcomeOf(t, false, err) != refused {
		t.Errorf("rejection on a node that never held the pod: %v, want refused", err)
	}

	// A failing node revision read fails the report.
	boom := errors.New("boom")
	if _, err := MarkRejected(storedPod(bound), "", "x", now, func(string) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("node revision failure: %v, want %v", err, boom)
	}

	// Rejections keep the newest MaxRejections.
	p = storedPod(bound)
	for i := range MaxRejections + 3 {
		p.NodeName, p.Status.Phase = fmt.Sprintf("n%d", i+1), bound
		if _, err := MarkRejected(p, "", "x", now, nodeRev); err != nil {
			t.Fatal(err)
		}
	}
	rs := p.GetStatus().GetRejections()
	if len(rs) != MaxRejections || rs[len(rs)-1].GetNodeName() != fmt.Sprintf("n%d", MaxRejections+3) {
		t.Errorf("%d rejections ending with %s, want %d ending with the newest", len(rs), rs[len(rs)-1].GetNodeName(), MaxRejections)
	}
}

func TestMarkFinishedRefusesUnfinishedPhase(t *testing.T) {
	for _, ph := range allPhases {
		if Finished(ph) {
			continue
		}
		p := storedPod(pending)
		if _, err := MarkFinished(p, ph, "x"); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("finishing as %v: %v, want ErrInvalidArgument", ph, err)
		}
	}
	p := storedPod(bound)
	p.Status.NominatedNodeName = "n2"
	if _, err := MarkFinished(p, failed, "oom"); err != nil {
		t.Fatal(err)
	}
	if st := p.GetStatus(); st.GetMessage() != "oom" || st.GetNominatedNodeName() != "" || p.NodeName != "n1" {
		t.Errorf("finished pod %v: want message oom, no nominated node, node kept", p)
	}
	p = &berthv1.Pod{Name: "p"}
	if write, err := MarkFinished(p, succeeded, ""); !write || err != nil || p.GetStatus().GetPhase() != succeeded {
		t.Errorf("finishing a pod without status: write %v, err %v, pod %v", write, err, p)
	}
}

// TestSchedulerTransitions: the scheduler's writes are guarded by the
// record's mod revision, not by phase; they rebuild the status and keep
// only the rejections.
func TestSchedulerTransitions(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, from := range allPhases {
		p := storedPod(from)
		p.Status.PreemptedBy, p.Status.NominatedNodeName = "ns/q", "n3"
		MarkBound(p, "n2", "r1", now)
		want := &berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u1", NodeName: "n2", Status: &berthv1.PodStatus{
			Phase: bound, ScheduledBy: "r1", StartTime: p.GetStatus().GetStartTime(),
			Rejections: []*berthv1.NodeRejection{{NodeName: "n0", NodeRevision: 3}},
		}}
		if !proto.Equal(p, want) || !p.GetStatus().GetStartTime().AsTime().Equal(now) {
			t.Errorf("MarkBound from %v = %v, want %v at %v", from, p, want, now)
		}

		p = storedPod(from)
		diag := &berthv1.SchedulingDiagnosis{NodesEvaluated: 4}
		MarkUnschedulable(p, "0/4 nodes", "n3", diag)
		want = proto.Clone(storedPod(from)).(*berthv1.Pod)
		want.Status = &berthv1.PodStatus{
			Phase: unschedulable, Message: "0/4 nodes", NominatedNodeName: "n3", Diagnosis: diag,
			Rejections: []*berthv1.NodeRejection{{NodeName: "n0", NodeRevision: 3}},
		}
		if !proto.Equal(p, want) {
			t.Errorf("MarkUnschedulable from %v = %v, want %v", from, p, want)
		}
	}
}

func TestMarks(t *testing.T) {
	p := &berthv1.Pod{Name: "p"}
	MarkPreempted(p, "ns/q")
	if p.GetStatus().GetPreemptedBy() != "ns/q" {
		t.Errorf("preempted_by %q, want ns/q", p.GetStatus().GetPreemptedBy())
	}
	for _, from := range allPhases {
		for _, node := range []string{"n1", "n2"} {
			p := storedPod(from)
			want := HoldsNode(from) && node == "n1"
			if got := MarkNodeLost(p, node); got != want || p.GetStatus().GetNodeLost() != want {
				t.Errorf("MarkNodeLost(%v on %q, %s) = %v, node_lost %v; want %v", from, p.NodeName, node, got, p.GetStatus().GetNodeLost(), want)
			}
			if want && MarkNodeLost(p, node) {
				t.Errorf("MarkNodeLost(%v) marked twice", from)
			}
		}
	}
}
