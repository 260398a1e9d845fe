package store

import (
	"errors"
	"testing"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestModifyPod(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"))[0]
	run := func(p *berthv1.Pod) (bool, error) {
		if p.GetStatus().GetPhase() == berthv1.PodPhase_POD_PHASE_RUNNING {
			return false, nil
		}
		p.Status.Phase = berthv1.PodPhase_POD_PHASE_RUNNING
		return true, nil
	}
	p, rev, err := s.ModifyPod(ctx, "ns", "a", "ua", run)
	if err != nil || p.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_RUNNING || rev <= c.Revision {
		t.Fatalf("first = %v, %d, %v; want running at a new revision", p.GetStatus(), rev, err)
	}
	// Already done: no write, the stored revision.
	again, rev2, err := s.ModifyPod(ctx, "ns", "a", "ua", run)
	if err != nil || rev2 != rev || again.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_RUNNING {
		t.Fatalf("repeat = %v, %d, %v; want the stored pod at %d", again.GetStatus(), rev2, err, rev)
	}
	if _, cur, _ := s.GetPod(ctx, "ns", "a"); cur != rev {
		t.Fatalf("a repeat wrote: revision %d, want %d", cur, rev)
	}

	refuse := errors.New("refused")
	for _, tc := range []struct {
		name, pod, uid string
		change         func(*berthv1.Pod) (bool, error)
		want           error
	}{
		{"stale uid", "a", "old", run, ErrConflict},
		{"empty uid", "a", "", run, ErrInvalidArgument},
		{"no such pod", "nope", "ua", run, ErrNotFound},
		{"refused", "a", "ua", func(*berthv1.Pod) (bool, error) { return false, refuse }, refuse},
	} {
		if _, _, err := s.ModifyPod(ctx, "ns", tc.pod, tc.uid, tc.change); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
