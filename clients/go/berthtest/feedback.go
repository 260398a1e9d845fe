package berthtest

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// The orchestrator's reports, with the real server's rules on uid, node
// and phase, and its idempotency. The fake records rejections but, doing
// no scheduling, does nothing with them.

// reportedPodLocked finds the pod a report names, checking uid and node.
func (s *Server) reportedPodLocked(namespace, name, uid, node string) (*berthv1.Pod, error) {
	if uid == "" {
		return nil, invalid("uid", "is required")
	}
	key := namespace + "/" + name
	p, ok := s.pods[key]
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "pod %s not found", key)
	case p.GetUid() != uid:
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s has uid %s, not %s", key, p.GetUid(), uid)
	case node != "" && node != p.GetNodeName():
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s is bound to %q, not %s", key, p.GetNodeName(), node)
	}
	return p, nil
}

func holds(p *berthv1.Pod) bool {
	ph := p.GetStatus().GetPhase()
	return p.GetNodeName() != "" && (ph == berthv1.PodPhase_POD_PHASE_BOUND || ph == berthv1.PodPhase_POD_PHASE_RUNNING)
}

func (p podService) ConfirmBinding(_ context.Context, req *berthv1.ConfirmBindingRequest) (*berthv1.ConfirmBindingResponse, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	pod, err := s.reportedPodLocked(req.GetNamespace(), req.GetName(), req.GetUid(), req.GetNodeName())
	if err != nil {
		return nil, err
	}
	key := req.GetNamespace() + "/" + req.GetName()
	switch pod.GetStatus().GetPhase() {
	case berthv1.PodPhase_POD_PHASE_RUNNING:
	case berthv1.PodPhase_POD_PHASE_BOUND:
		s.revision++
		pod.Status.Phase = berthv1.PodPhase_POD_PHASE_RUNNING
		s.setReportRevLocked(key)
	default:
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s is %v: only a bound pod can be confirmed", key, pod.GetStatus().GetPhase())
	}
	return &berthv1.ConfirmBindingResponse{Pod: proto.CloneOf(pod), Revision: s.reportRevLocked(key)}, nil
}

func (p podService) RejectBinding(_ context.Context, req *berthv1.RejectBindingRequest) (*berthv1.RejectBindingResponse, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	pod, err := s.reportedPodLocked(req.GetNamespace(), req.GetName(), req.GetUid(), "")
	if err != nil {
		return nil, err
	}
	key := req.GetNamespace() + "/" + req.GetName()
	if !holds(pod) {
		for _, r := range pod.GetStatus().GetRejections() {
			if req.GetNodeName() == "" || r.GetNodeName() == req.GetNodeName() {
				return &berthv1.RejectBindingResponse{Pod: proto.CloneOf(pod), Revision: s.reportRevLocked(key)}, nil
			}
		}
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s is %v: only a bound or running pod can be rejected", key, pod.GetStatus().GetPhase())
	}
	if req.GetNodeName() != "" && req.GetNodeName() != pod.GetNodeName() {
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s is bound to %s, not %s", key, pod.GetNodeName(), req.GetNodeName())
	}
	s.revision++
	ev := bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND, pod, s.revision)
	ev.Message = req.GetReason()
	pod.Status = &berthv1.PodStatus{
		Phase:   berthv1.PodPhase_POD_PHASE_PENDING,
		Message: fmt.Sprintf("node %s could not start the pod: %s", pod.GetNodeName(), req.GetReason()),
		Rejections: append(pod.GetStatus().GetRejections(), &berthv1.NodeRejection{
			NodeName: pod.GetNodeName(), Reason: req.GetReason(), Time: timestamppb.Now(),
		}),
	}
	pod.NodeName = ""
	s.setReportRevLocked(key)
	s.appendEventsLocked(ev)
	return &berthv1.RejectBindingResponse{Pod: proto.CloneOf(pod), Revision: s.revision}, nil
}

func (p podService) CompletePod(_ context.Context, req *berthv1.CompletePodRequest) (*berthv1.CompletePodResponse, error) {
	phase := req.GetPhase()
	if phase != berthv1.PodPhase_POD_PHASE_SUCCEEDED && phase != berthv1.PodPhase_POD_PHASE_FAILED {
		return nil, invalid("phase", "must be POD_PHASE_SUCCEEDED or POD_PHASE_FAILED")
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	pod, err := s.reportedPodLocked(req.GetNamespace(), req.GetName(), req.GetUid(), "")
	if err != nil {
		return nil, err
	}
	key := req.GetNamespace() + "/" + req.GetName()
	switch cur := pod.GetStatus().GetPhase(); cur {
	case phase:
		return &berthv1.CompletePodResponse{Pod: proto.CloneOf(pod), Revision: s.reportRevLocked(key)}, nil
	case berthv1.PodPhase_POD_PHASE_SUCCEEDED, berthv1.PodPhase_POD_PHASE_FAILED:
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s already finished as %v", key, cur)
	}
	s.revision++
	if holds(pod) {
		ev := bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND, pod, s.revision)
		ev.Message = req.GetMessage()
		s.appendEventsLocked(ev)
	}
	if pod.Status == nil {
		pod.Status = &berthv1.PodStatus{}
	}
	pod.Status.Phase, pod.Status.Message = phase, req.GetMessage()
	s.setReportRevLocked(key)
	return &berthv1.CompletePodResponse{Pod: proto.CloneOf(pod), Revision: s.revision}, nil
}

// RenewNodeLease answers as for a live lease: the fake's leases never
// expire.
func (c clusterService) RenewNodeLease(_ context.Context, req *berthv1.RenewNodeLeaseRequest) (*berthv1.RenewNodeLeaseResponse, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[req.GetName()]
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "node %q not found", req.GetName())
	case n.GetLeaseTtlSeconds() <= 0:
		return nil, status.Errorf(codes.FailedPrecondition, "node %s has no lease", req.GetName())
	}
	return &berthv1.RenewNodeLeaseResponse{TtlSeconds: int64(n.GetLeaseTtlSeconds())}, nil
}

// reportRevLocked is the revision a repeated report returns: that of the
// pod's last report, or of its submit.
func (s *Server) reportRevLocked(key string) int64 {
	if rev, ok := s.reportRevs[key]; ok {
		return rev
	}
	return s.podRevs[key]
}

func (s *Server) setReportRevLocked(key string) {
	if s.reportRevs == nil {
		s.reportRevs = map[string]int64{}
	}
	s.reportRevs[key] = s.revision
}
