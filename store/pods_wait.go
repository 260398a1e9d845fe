package store

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// WaitPod follows one pod from revision fromRev on and returns the first
// value (with its revision) for which done is true. It returns ErrNotFound
// if the pod is deleted first, and ctx's error when ctx ends: the wait is
// bounded only by the caller.
func (s *Store) WaitPod(ctx context.Context, namespace, name string, fromRev int64, done func(*berthv1.Pod) bool) (*berthv1.Pod, int64, error) {
	key := s.keys.pod(namespace, name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.client.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(fromRev))
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return nil, 0, &CompactedError{CompactRevision: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return nil, 0, s.callError(ctx, "wait pod", err)
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil, ev.Kv.ModRevision, fmt.Errorf("%w: pod %s/%s deleted", ErrNotFound, namespace, name)
			}
			p, err := decodePod(ev.Kv.Value)
			if err != nil {
				return nil, 0, err
			}
			if done(p) {
				return p, ev.Kv.ModRevision, nil
			}
		}
	}
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	return nil, 0, fmt.Errorf("%w: wait pod: watch closed", ErrUnavailable)
}

// UpdatePod applies change to the stored pod and writes it back if nothing
// else wrote it meanwhile, retrying a few times on races. change returns an
// error (returned as is) to refuse the update. uid, if set, must match.
func (s *Store) UpdatePod(ctx context.Context, namespace, name, uid string, change func(*berthv1.Pod) error) (*berthv1.Pod, int64, error) {
	const attempts = 5
	for i := 0; ; i++ {
		p, rev, err := s.GetPod(ctx, namespace, name)
		if err != nil {
			return nil, 0, err
		}
		if uid != "" && p.GetUid() != uid {
			return nil, 0, fmt.Errorf("%w: pod %s/%s has uid %s, not %s", ErrConflict, namespace, name, p.GetUid(), uid)
		}
		if err := change(p); err != nil {
			return nil, 0, err
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

func isConflict(err error) bool { return errors.Is(err, ErrConflict) }
