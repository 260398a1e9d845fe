package store

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// The pod lifecycle on the stored pod: the one place that says which phase
// follows which (DESIGN.md, "Pod lifecycle"). Every writer of a pod's
// phase goes through these functions.
//
//	transition        from                           to
//	Admit             (submitted)                    PENDING, or BOUND with node_name
//	MarkBound         PENDING, UNSCHEDULABLE         BOUND on a node
//	MarkUnschedulable PENDING, UNSCHEDULABLE         UNSCHEDULABLE, diagnosis kept
//	MarkRunning       BOUND                          RUNNING (RUNNING: no-op)
//	MarkRejected      BOUND, RUNNING                 PENDING, node cleared, rejection kept
//	MarkFinished      any but SUCCEEDED, FAILED      SUCCEEDED or FAILED
//
// MarkBound and MarkUnschedulable are the scheduler's: they are guarded by
// the mod revision of the record the cycle read, not by phase, so they
// refuse nothing here. The orchestrator's reports (MarkRunning,
// MarkRejected, MarkFinished) may repeat or arrive late, so they are judged
// on the stored phase: a report that already took effect is a no-op, one
// the phase does not allow is a *TransitionError.
//
// ASSUMED is not a phase of the stored pod: an assumption is a key of its
// own (assumptions.go) and the pod stays PENDING until its binding commits,
// so a permit timeout or a lost lease only drops the assumption. Two marks
// change no phase: preempted_by (MarkPreempted, streamed as EVICT) and
// node_lost (MarkNodeLost).

// MaxRejections bounds status.rejections; the oldest go first.
const MaxRejections = 16

// defaultRejectReason is recorded when the orchestrator gives none.
const defaultRejectReason = "rejected by the orchestrator"

// HoldsNode tells whether a pod in phase occupies room on its node (when it
// has one): it is BOUND or RUNNING.
func HoldsNode(phase berthv1.PodPhase) bool {
	return phase == berthv1.PodPhase_POD_PHASE_BOUND || phase == berthv1.PodPhase_POD_PHASE_RUNNING
}

// Finished tells whether phase is terminal: the pod holds nothing and its
// phase never changes again.
func Finished(phase berthv1.PodPhase) bool {
	return phase == berthv1.PodPhase_POD_PHASE_SUCCEEDED || phase == berthv1.PodPhase_POD_PHASE_FAILED
}

// Decided tells whether the scheduler has reached a verdict on a pod in
// phase: it left PENDING (placed, found unschedulable, or finished).
func Decided(phase berthv1.PodPhase) bool {
	return phase != berthv1.PodPhase_POD_PHASE_PENDING && phase != berthv1.PodPhase_POD_PHASE_UNSPECIFIED
}

// AwaitsPlacement tells whether a pod in phase still waits for a node
// (undecided, or UNSCHEDULABLE and to be tried again), so what steers its
// scheduling may still change.
func AwaitsPlacement(phase berthv1.PodPhase) bool {
	return !Decided(phase) || phase == berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE
}

// holdsNode tells whether a stored pod occupies a node: the binding
// stream's sense of bound.
func holdsNode(p *berthv1.Pod) bool {
	return p != nil && p.NodeName != "" && HoldsNode(p.GetStatus().GetPhase())
}

// createPhase is the phase a new pod starts in: PENDING, or BOUND when
// node_name declares a pod that already runs there (no scheduling cycle).
func createPhase(nodeName string) berthv1.PodPhase {
	if nodeName != "" {
		return berthv1.PodPhase_POD_PHASE_BOUND
	}
	return berthv1.PodPhase_POD_PHASE_PENDING
}

// Admit prepares a submitted pod for CreatePods: Berth owns the status, so
// it is replaced by the create phase (with start time now when the pod is
// declared bound). The uid is left to CreatePods, which assigns one only
// after its identical-pod check, so a plain resubmission stays idempotent.
//
// The result shares every field but the status with p: neither may be
// changed afterwards.
func Admit(p *berthv1.Pod, now time.Time) *berthv1.Pod {
	p = shallowCopy(p)
	p.Status = &berthv1.PodStatus{Phase: createPhase(p.NodeName)}
	if p.NodeName != "" {
		p.Status.StartTime = timestamppb.New(now)
	}
	return p
}

// withCreateDefaults returns p, or a copy with a uid (of Berth's form, bound
// to p's namespace/name: uid.go) and the create phase filled in where
// missing. The copy shares with p the fields it does not fill in.
func withCreateDefaults(p *berthv1.Pod) *berthv1.Pod {
	if p.Uid != "" && p.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_UNSPECIFIED {
		return p
	}
	c := shallowCopy(p)
	if c.Uid == "" {
		c.Uid = assignUID(c.Namespace, c.Name)
	}
	if c.Status == nil {
		c.Status = &berthv1.PodStatus{}
	} else if c.Status.Phase == berthv1.PodPhase_POD_PHASE_UNSPECIFIED {
		c.Status = shallowCopyStatus(c.Status) // p's status is not ours to change
	}
	if c.Status.Phase == berthv1.PodPhase_POD_PHASE_UNSPECIFIED {
		c.Status.Phase = createPhase(c.NodeName)
	}
	return c
}

// shallowCopy returns a new pod holding p's fields, sharing its lists, maps
// and sub-messages, for a copy that only replaces whole fields. A deep
// proto.Clone copies a pod's containers and maps through reflection, and
// was most of what admitting a pod cost; so, at about the same cost, was
// a copy through protoreflect. TestShallowCopy fails if a field is added
// to Pod and not here.
func shallowCopy(p *berthv1.Pod) *berthv1.Pod {
	c := &berthv1.Pod{
		Namespace:                 p.Namespace,
		Name:                      p.Name,
		Uid:                       p.Uid,
		Labels:                    p.Labels,
		Priority:                  p.Priority,
		Containers:                p.Containers,
		InitContainers:            p.InitContainers,
		Overhead:                  p.Overhead,
		NodeName:                  p.NodeName,
		SchedulerName:             p.SchedulerName,
		Status:                    p.Status,
		NodeSelector:              p.NodeSelector,
		Tolerations:               p.Tolerations,
		Affinity:                  p.Affinity,
		TopologySpreadConstraints: p.TopologySpreadConstraints,
		SchedulingGates:           p.SchedulingGates,
		PreemptionPolicy:          p.PreemptionPolicy,
		PodGroup:                  p.PodGroup,
	}
	if u := p.ProtoReflect().GetUnknown(); len(u) > 0 {
		c.ProtoReflect().SetUnknown(u)
	}
	return c
}

// shallowCopyStatus is shallowCopy for a status; TestShallowCopy guards it
// the same way.
func shallowCopyStatus(s *berthv1.PodStatus) *berthv1.PodStatus {
	c := &berthv1.PodStatus{
		Phase:             s.Phase,
		Message:           s.Message,
		NominatedNodeName: s.NominatedNodeName,
		StartTime:         s.StartTime,
		Diagnosis:         s.Diagnosis,
		PreemptedBy:       s.PreemptedBy,
		ScheduledBy:       s.ScheduledBy,
		Rejections:        s.Rejections,
		NodeLost:          s.NodeLost,
	}
	if u := s.ProtoReflect().GetUnknown(); len(u) > 0 {
		c.ProtoReflect().SetUnknown(u)
	}
	return c
}

// chargesOnCreate tells whether creating p adds it to a node, so that node's
// allocation must move: it names a node and has not finished.
func chargesOnCreate(p *berthv1.Pod) bool {
	return p.NodeName != "" && !Finished(p.GetStatus().GetPhase())
}

// MarkBound places p on node: what a binding commit writes. The status is
// rebuilt (BOUND since now, by replica); the rejections stay for the pod's
// life.
func MarkBound(p *berthv1.Pod, node, replica string, now time.Time) {
	p.NodeName = node
	p.Status = &berthv1.PodStatus{
		Phase:       berthv1.PodPhase_POD_PHASE_BOUND,
		StartTime:   timestamppb.New(now),
		ScheduledBy: replica,
		Rejections:  p.GetStatus().GetRejections(),
	}
}

// MarkUnschedulable records that a cycle found no node for p, and why. The
// status is rebuilt; the rejections stay.
func MarkUnschedulable(p *berthv1.Pod, message, nominatedNode string, diagnosis *berthv1.SchedulingDiagnosis) {
	p.Status = &berthv1.PodStatus{
		Phase:             berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE,
		Message:           message,
		NominatedNodeName: nominatedNode,
		Diagnosis:         diagnosis,
		Rejections:        p.GetStatus().GetRejections(),
	}
}

// MarkRunning confirms that p started on its node: BOUND -> RUNNING. node,
// if set, must be p's node. It returns whether p changed (false: already
// running), in ModifyPod's form.
func MarkRunning(p *berthv1.Pod, node string) (bool, error) {
	if err := onNode(p, node); err != nil {
		return false, err
	}
	switch phase := p.GetStatus().GetPhase(); phase {
	case berthv1.PodPhase_POD_PHASE_RUNNING:
		return false, nil
	case berthv1.PodPhase_POD_PHASE_BOUND:
		p.Status.Phase = berthv1.PodPhase_POD_PHASE_RUNNING
		return true, nil
	default:
		return false, refuse("%s is %v: only a bound pod can be confirmed", podWhat(p), phase)
	}
}

// MarkRejected takes p off its node and back to PENDING, the orchestrator
// having failed to start it there: BOUND or RUNNING -> PENDING. node, if
// set, must be p's node. The rejection records the node and its record's
// revision (read with nodeRevision, only when the rejection applies) so the
// core keeps p off that node until it changes. What belonged to the binding
// (start time, replica, lost and eviction marks) goes with it. It returns
// whether p changed (false: this rejection already took effect).
func MarkRejected(p *berthv1.Pod, node, reason string, now time.Time, nodeRevision func(node string) (int64, error)) (bool, error) {
	if reason == "" {
		reason = defaultRejectReason
	}
	if phase := p.GetStatus().GetPhase(); !HoldsNode(phase) {
		if p.GetNodeName() == "" && rejectedBy(p, node) {
			return false, nil
		}
		return false, refuse("%s is %v: only a bound or running pod can be rejected", podWhat(p), phase)
	}
	if err := onNode(p, node); err != nil {
		return false, err
	}
	nodeRev, err := nodeRevision(p.GetNodeName())
	if err != nil {
		return false, err
	}
	rejections := append(p.GetStatus().GetRejections(), &berthv1.NodeRejection{
		NodeName: p.GetNodeName(), NodeRevision: nodeRev, Reason: reason, Time: timestamppb.New(now),
	})
	if n := len(rejections); n > MaxRejections {
		rejections = rejections[n-MaxRejections:]
	}
	p.Status = &berthv1.PodStatus{
		Phase:      berthv1.PodPhase_POD_PHASE_PENDING,
		Message:    fmt.Sprintf("node %s could not start the pod: %s", p.GetNodeName(), reason),
		Rejections: rejections,
	}
	p.NodeName = ""
	return true, nil
}

// MarkFinished records that p finished in phase (SUCCEEDED or FAILED) with
// message; what it held is freed. A pod never bound may finish too (the
// orchestrator gave up on it). It returns whether p changed (false: it
// already finished so).
func MarkFinished(p *berthv1.Pod, phase berthv1.PodPhase, message string) (bool, error) {
	if !Finished(phase) {
		return false, fmt.Errorf("%w: a pod finishes as POD_PHASE_SUCCEEDED or POD_PHASE_FAILED, not %v", ErrInvalidArgument, phase)
	}
	switch cur := p.GetStatus().GetPhase(); {
	case cur == phase:
		return false, nil
	case Finished(cur):
		return false, refuse("%s already finished as %v", podWhat(p), cur)
	}
	if p.Status == nil {
		p.Status = &berthv1.PodStatus{}
	}
	p.Status.Phase = phase
	p.Status.Message = message
	p.Status.NominatedNodeName = ""
	return true, nil
}

// MarkPreempted marks p as a preemption victim of preemptor (namespace/name).
// The mark is what WatchBindings turns into EVICT; p keeps its node until
// the orchestrator deletes it.
func MarkPreempted(p *berthv1.Pod, preemptor string) {
	if p.Status == nil {
		p.Status = &berthv1.PodStatus{}
	}
	p.Status.PreemptedBy = preemptor
}

// MarkNodeLost marks p node_lost if it holds node and is not marked yet,
// and tells whether it did.
func MarkNodeLost(p *berthv1.Pod, node string) bool {
	if !HoldsNode(p.GetStatus().GetPhase()) || p.GetNodeName() != node || p.GetStatus().GetNodeLost() {
		return false
	}
	p.Status.NodeLost = true
	return true
}

// TransitionError refuses a transition that the pod's stored phase does not
// allow: the report asking for it is stale or wrong. gRPC callers see
// FailedPrecondition with the message.
type TransitionError struct{ msg string }

func (e *TransitionError) Error() string { return e.msg }

// GRPCStatus lets a server return the error as is.
func (e *TransitionError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.msg)
}

func refuse(format string, args ...any) error {
	return &TransitionError{msg: fmt.Sprintf(format, args...)}
}

func podWhat(p *berthv1.Pod) string { return "pod " + p.GetNamespace() + "/" + p.GetName() }

// onNode checks a report's optional node against the pod's node.
func onNode(p *berthv1.Pod, node string) error {
	switch {
	case node == "" || node == p.GetNodeName():
		return nil
	case p.GetNodeName() == "":
		return refuse("%s is not bound (reported on node %s)", podWhat(p), node)
	default:
		return refuse("%s is bound to %s, not %s", podWhat(p), p.GetNodeName(), node)
	}
}

// rejectedBy tells whether p carries a rejection by node (any node when
// node is empty).
func rejectedBy(p *berthv1.Pod, node string) bool {
	for _, r := range p.GetStatus().GetRejections() {
		if node == "" || r.GetNodeName() == node {
			return true
		}
	}
	return false
}
