package store

import (
	"context"
	"fmt"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// ModifyPod is UpdatePod for reports that may be repeated (the
// orchestrator's ConfirmBinding, RejectBinding, CompletePod): change edits
// the pod and returns whether it needs writing. When it does not (the
// report already took effect), the stored pod and the revision that last
// wrote it are returned with no write, so a retry adds no watch event. The
// stored pod's uid must equal uid (ErrConflict otherwise: a stale report
// about an earlier incarnation); ErrNotFound if there is no such pod. An
// error from change is returned as is.
func (s *Store) ModifyPod(ctx context.Context, namespace, name, uid string, change func(*berthv1.Pod) (bool, error)) (*berthv1.Pod, int64, error) {
	if uid == "" {
		return nil, 0, fmt.Errorf("%w: empty uid", ErrInvalidArgument)
	}
	const attempts = 5
	for i := 0; ; i++ {
		p, rev, err := s.GetPod(ctx, namespace, name)
		if err != nil {
			return nil, 0, err
		}
		if p.GetUid() != uid {
			return nil, 0, fmt.Errorf("%w: pod %s/%s has uid %s, not %s", ErrConflict, namespace, name, p.GetUid(), uid)
		}
		write, err := change(p)
		if err != nil {
			return nil, 0, err
		}
		if !write {
			return p, rev, nil
		}
		res := s.UpdatePods(ctx, []PodUpdate{{Pod: p, ExpectedModRevision: rev}})[0]
		if res.Err == nil {
			return p, res.Revision, nil
		}
		if !isConflict(res.Err) || i+1 == attempts {
			return nil, 0, res.Err
		}
	}
}
