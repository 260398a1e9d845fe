package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// The orchestrator's reports about bound pods. Each is keyed by uid (a
// report about an earlier pod of the same name fails the store's uid check,
// FailedPrecondition) and idempotent: a report that already took effect
// returns the stored pod without writing.

// maxRejections bounds status.rejections; the oldest go first.
const maxRejections = 16

// ConfirmBinding marks a bound pod running.
func (ps *podService) ConfirmBinding(ctx context.Context, req *berthv1.ConfirmBindingRequest) (*berthv1.ConfirmBindingResponse, error) {
	what := "pod " + req.GetNamespace() + "/" + req.GetName()
	p, rev, err := ps.store.ModifyPod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) (bool, error) {
		if err := onNode(p, req.GetNodeName(), what); err != nil {
			return false, err
		}
		switch phase := p.GetStatus().GetPhase(); phase {
		case berthv1.PodPhase_POD_PHASE_RUNNING:
			return false, nil
		case berthv1.PodPhase_POD_PHASE_BOUND:
			p.Status.Phase = berthv1.PodPhase_POD_PHASE_RUNNING
			return true, nil
		default:
			return false, status.Errorf(codes.FailedPrecondition, "%s is %v: only a bound pod can be confirmed", what, phase)
		}
	})
	if err != nil {
		return nil, toStatus(err, what)
	}
	return &berthv1.ConfirmBindingResponse{Pod: p, Revision: rev}, nil
}

// RejectBinding takes a bound or running pod off its node and sends it back
// to pending, recording the node and the revision of its record: the core
// keeps the pod off the node until that record changes, and queues it after
// a backoff.
func (ps *podService) RejectBinding(ctx context.Context, req *berthv1.RejectBindingRequest) (*berthv1.RejectBindingResponse, error) {
	what := "pod " + req.GetNamespace() + "/" + req.GetName()
	reason := req.GetReason()
	if reason == "" {
		reason = "rejected by the orchestrator"
	}
	p, rev, err := ps.store.ModifyPod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) (bool, error) {
		phase := p.GetStatus().GetPhase()
		if phase != berthv1.PodPhase_POD_PHASE_BOUND && phase != berthv1.PodPhase_POD_PHASE_RUNNING {
			if p.GetNodeName() == "" && rejectedBy(p, req.GetNodeName()) {
				return false, nil // this rejection already took effect
			}
			return false, status.Errorf(codes.FailedPrecondition, "%s is %v: only a bound or running pod can be rejected", what, phase)
		}
		if err := onNode(p, req.GetNodeName(), what); err != nil {
			return false, err
		}
		nodeRev, err := ps.store.NodeModRevision(ctx, p.GetNodeName())
		if err != nil {
			return false, err
		}
		rejections := append(p.GetStatus().GetRejections(), &berthv1.NodeRejection{
			NodeName: p.GetNodeName(), NodeRevision: nodeRev, Reason: reason, Time: timestamppb.New(time.Now()),
		})
		if n := len(rejections); n > maxRejections {
			rejections = rejections[n-maxRejections:]
		}
		// What belonged to the binding (start time, replica, lost and
		// eviction marks) goes with it.
		p.Status = &berthv1.PodStatus{
			Phase:      berthv1.PodPhase_POD_PHASE_PENDING,
			Message:    fmt.Sprintf("node %s could not start the pod: %s", p.GetNodeName(), reason),
			Rejections: rejections,
		}
		p.NodeName = ""
		return true, nil
	})
	if err != nil {
		return nil, toStatus(err, what)
	}
	return &berthv1.RejectBindingResponse{Pod: p, Revision: rev}, nil
}

// CompletePod records that a pod finished. Terminal pods hold nothing, so
// the core frees their room; a pod never bound may finish too (the
// orchestrator gave up on it).
func (ps *podService) CompletePod(ctx context.Context, req *berthv1.CompletePodRequest) (*berthv1.CompletePodResponse, error) {
	what := "pod " + req.GetNamespace() + "/" + req.GetName()
	want := req.GetPhase()
	p, rev, err := ps.store.ModifyPod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) (bool, error) {
		switch phase := p.GetStatus().GetPhase(); phase {
		case want:
			return false, nil
		case berthv1.PodPhase_POD_PHASE_SUCCEEDED, berthv1.PodPhase_POD_PHASE_FAILED:
			return false, status.Errorf(codes.FailedPrecondition, "%s already finished as %v", what, phase)
		}
		if p.Status == nil {
			p.Status = &berthv1.PodStatus{}
		}
		p.Status.Phase = want
		p.Status.Message = req.GetMessage()
		p.Status.NominatedNodeName = ""
		return true, nil
	})
	if err != nil {
		return nil, toStatus(err, what)
	}
	return &berthv1.CompletePodResponse{Pod: p, Revision: rev}, nil
}

// onNode checks a report's optional node_name against the pod's node.
func onNode(p *berthv1.Pod, node, what string) error {
	switch {
	case node == "" || node == p.GetNodeName():
		return nil
	case p.GetNodeName() == "":
		return status.Errorf(codes.FailedPrecondition, "%s is not bound (reported on node %s)", what, node)
	default:
		return status.Errorf(codes.FailedPrecondition, "%s is bound to %s, not %s", what, p.GetNodeName(), node)
	}
}

// rejectedBy tells whether the pod carries a rejection by node (any node
// when node is empty).
func rejectedBy(p *berthv1.Pod, node string) bool {
	for _, r := range p.GetStatus().GetRejections() {
		if node == "" || r.GetNodeName() == node {
			return true
		}
	}
	return false
}
