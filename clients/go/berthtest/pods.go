package berthtest

import (
	"context"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// podService keeps pods as the real server does where a client can tell:
// idempotent resubmission, uids held by one pod, paging and deletion.

type podService struct {
	berthv1.UnimplementedPodServiceServer
	s *Server
}

var _ berthv1.PodServiceServer = podService{}

func (p podService) SubmitPod(_ context.Context, req *berthv1.SubmitPodRequest) (*berthv1.SubmitPodResponse, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, rev, err := s.submitLocked(req.GetPod())
	if err != nil {
		return nil, err
	}
	return &berthv1.SubmitPodResponse{Pod: stored, Revision: rev}, nil
}

func (p podService) SubmitPods(_ context.Context, req *berthv1.SubmitPodsRequest) (*berthv1.SubmitPodsResponse, error) {
	if len(req.GetPods()) > 1000 {
		return nil, invalid("pods", "at most 1000 pods per call")
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &berthv1.SubmitPodsResponse{}
	for _, pod := range req.GetPods() {
		stored, rev, err := s.submitLocked(pod)
		resp.Results = append(resp.Results, &berthv1.SubmitPodResult{
			Pod: stored, Revision: rev,
			Code: int32(status.Code(err)), Message: status.Convert(err).Message(),
		})
	}
	return resp, nil
}

// submitLocked stores a pod idempotently, as the real server does: an
// identical resubmission returns the stored pod and its original revision.
func (s *Server) submitLocked(pod *berthv1.Pod) (*berthv1.Pod, int64, error) {
	switch {
	case pod.GetNamespace() == "":
		return nil, 0, invalid("pod.namespace", "must not be empty")
	case pod.GetName() == "":
		return nil, 0, invalid("pod.name", "must not be empty")
	case len(pod.GetContainers()) == 0:
		return nil, 0, invalid("pod.containers", "at least one container is required")
	}
	key := pod.GetNamespace() + "/" + pod.GetName()
	if old, ok := s.pods[key]; ok {
		if sameSpec(old, pod) {
			return proto.CloneOf(old), s.podRevs[key], nil
		}
		return nil, 0, status.Errorf(codes.AlreadyExists, "pod %s exists with a different spec", key)
	}
	if holder := s.uidHolderLocked(pod.GetUid()); holder != "" {
		return nil, 0, uidInUse(pod.GetUid(), holder)
	}
	stored := proto.CloneOf(pod)
	if stored.Uid == "" {
		s.nextUID++
		stored.Uid = fmt.Sprintf("uid-%d", s.nextUID)
	}
	s.revision++
	stored.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING}
	if stored.GetNodeName() != "" {
		stored.Status.Phase = berthv1.PodPhase_POD_PHASE_BOUND
		s.appendEventsLocked(bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, stored, s.revision))
	}
	s.pods[key] = stored
	s.podRevs[key] = s.revision
	return proto.CloneOf(stored), s.revision, nil
}

// uidHolderLocked names the pod (namespace/name) that has uid, or "". A
// scan: the fake holds few pods, and an index would need keeping on every
// path that removes one.
func (s *Server) uidHolderLocked(uid string) string {
	if uid == "" {
		return ""
	}
	for key, p := range s.pods {
		if p.GetUid() == uid {
			return key
		}
	}
	return ""
}

// errorDomain is the ErrorInfo domain of the real server's errors.
const errorDomain = "berth.v1"

// uidInUse is the real server's refusal of a pod whose uid another pod
// has: AlreadyExists with an ErrorInfo UID_IN_USE naming the field and
// the holder.
func uidInUse(uid, holder string) error {
	st := status.New(codes.AlreadyExists, fmt.Sprintf("submit pod: pod.uid %q is already the uid of pod %s", uid, holder))
	st, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   "UID_IN_USE",
		Domain:   errorDomain,
		Metadata: map[string]string{"field": "pod.uid", "holder": holder},
	})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return st.Err()
}

func sameSpec(stored, submitted *berthv1.Pod) bool {
	a, b := proto.CloneOf(stored), proto.CloneOf(submitted)
	a.Status, b.Status = nil, nil
	if b.Uid == "" {
		b.Uid = a.Uid
	}
	if b.NodeName == "" {
		b.NodeName = a.NodeName
	}
	return proto.Equal(a, b)
}

func (p podService) DeletePod(_ context.Context, req *berthv1.DeletePodRequest) (*berthv1.DeletePodResponse, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	key := req.GetNamespace() + "/" + req.GetName()
	old, ok := s.pods[key]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s not found", key)
	}
	if req.GetUid() != "" && req.GetUid() != old.GetUid() {
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s has uid %s, not %s", key, old.GetUid(), req.GetUid())
	}
	delete(s.pods, key)
	delete(s.podRevs, key)
	s.revision++
	if old.GetNodeName() != "" {
		s.appendEventsLocked(bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND, old, s.revision))
	}
	return &berthv1.DeletePodResponse{Revision: s.revision}, nil
}

func (p podService) GetPod(_ context.Context, req *berthv1.GetPodRequest) (*berthv1.GetPodResponse, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	key := req.GetNamespace() + "/" + req.GetName()
	pod, ok := s.pods[key]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s not found", key)
	}
	return &berthv1.GetPodResponse{Pod: proto.CloneOf(pod)}, nil
}

func (p podService) ListPods(_ context.Context, req *berthv1.ListPodsRequest) (*berthv1.ListPodsResponse, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	match := make(map[string]*berthv1.Pod)
	for key, pod := range s.pods {
		if (req.GetNamespace() == "" || pod.GetNamespace() == req.GetNamespace()) &&
			(req.GetPhase() == berthv1.PodPhase_POD_PHASE_UNSPECIFIED || pod.GetStatus().GetPhase() == req.GetPhase()) &&
			(req.GetNodeName() == "" || pod.GetNodeName() == req.GetNodeName()) {
			match[key] = pod
		}
	}
	pods, next := page(s, mapKeys(match), match, req.GetPageSize(), req.GetPageToken())
	for i, pod := range pods {
		pods[i] = proto.CloneOf(pod)
	}
	return &berthv1.ListPodsResponse{Pods: pods, NextPageToken: next}, nil
}
