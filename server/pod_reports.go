package server

import (
	"context"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// The orchestrator's reports about bound pods. Each is keyed by uid (a
// report about an earlier pod of the same name fails the store's uid check,
// FailedPrecondition) and idempotent: a report that already took effect
// returns the stored pod without writing.

// ConfirmBinding marks a bound pod running.
func (ps *podService) ConfirmBinding(ctx context.Context, req *berthv1.ConfirmBindingRequest) (*berthv1.ConfirmBindingResponse, error) {
	what := "pod " + req.GetNamespace() + "/" + req.GetName()
	p, rev, err := ps.store.ModifyPod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) (bool, error) {
		return store.MarkRunning(p, req.GetNodeName())
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
	p, rev, err := ps.store.ModifyPod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) (bool, error) {
		return store.MarkRejected(p, req.GetNodeName(), req.GetReason(), time.Now(), func(node string) (int64, error) {
			return ps.store.NodeModRevision(ctx, node)
		})
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
	p, rev, err := ps.store.ModifyPod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) (bool, error) {
		return store.MarkFinished(p, req.GetPhase(), req.GetMessage())
	})
	if err != nil {
		return nil, toStatus(err, what)
	}
	return &berthv1.CompletePodResponse{Pod: p, Revision: rev}, nil
}
