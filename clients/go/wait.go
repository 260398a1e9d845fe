package berth

import (
	"context"
	"errors"
	"fmt"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// UnschedulableError is SubmitAndWait's answer when the scheduler found no
// node for the pod. The pod stays queued and is retried on cluster events;
// Pod.Status.Diagnosis says why no node fitted.
type UnschedulableError struct {
	Pod *berthv1.Pod
}

func (e *UnschedulableError) Error() string {
	msg := e.Pod.GetStatus().GetMessage()
	if msg == "" {
		msg = "no node fits"
	}
	return fmt.Sprintf("berth: pod %s/%s is unschedulable: %s", e.Pod.GetNamespace(), e.Pod.GetName(), msg)
}

// pollBackoff paces WaitForBinding's reads of the pod: the watch reports a
// binding at once, so the reads only have to catch the verdicts the watch
// does not carry (unschedulable, deleted) in reasonable time.
var pollBackoff = backoff{base: 200 * time.Millisecond, max: 2 * time.Second}

// SubmitAndWait submits pod and waits until the scheduler has decided it:
// it returns the pod as stored once bound (or later: running, finished),
// or an *UnschedulableError when no node fits. A resubmit of a pod that is
// already bound returns its binding at once. ctx bounds the wait; a pod
// held by scheduling gates waits until they are removed.
func (c *Client) SubmitAndWait(ctx context.Context, pod *berthv1.Pod) (*berthv1.Pod, error) {
	stored, rev, err := c.SubmitPod(ctx, pod)
	if err != nil {
		return nil, err
	}
	return c.WaitForBinding(ctx, stored, rev)
}

// WaitForBinding waits for the decision on stored, a pod as a write at
// revision rev returned it (SubmitPod, UpdatePod, ...), with the results
// of SubmitAndWait. It cannot miss a binding made between that write and
// the wait: the watch starts at rev, not at "now".
func (c *Client) WaitForBinding(ctx context.Context, stored *berthv1.Pod, rev int64) (*berthv1.Pod, error) {
	if done, p, err := verdict(stored); done {
		return p, err
	}
	ctx, cancel := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() { watchDone <- c.watchForBound(ctx, stored, rev) }()
	bound := watchDone // nil once received, so it is not received twice
	defer func() {
		cancel()
		if bound != nil {
			<-watchDone // no goroutine outlives the call
		}
	}()

	polls := pollBackoff.sequence()
	for {
		select {
		case err := <-bound:
			bound = nil
			if err != nil {
				return nil, err
			}
			// Read the pod at once: it is bound unless rejected since, and
			// then the polls go on.
			polls.Reset()
		case <-time.After(polls.NextBackOff()):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p, err := c.currentVerdict(ctx, stored)
		if p != nil || err != nil {
			return p, err
		}
	}
}

// errBoundSeen ends the watch from its callback once the binding arrived.
var errBoundSeen = errors.New("bound")

// watchForBound returns nil once the watch carries stored's BOUND event.
// When rev has been compacted away (a pod stored long ago), the pod is
// read again and the watch restarts at the oldest revision left: that is
// no later than the read, so a binding after the read is still seen.
func (c *Client) watchForBound(ctx context.Context, stored *berthv1.Pod, from int64) error {
	for {
		err := c.WatchBindings(ctx, from, func(ev *berthv1.BindingEvent) error {
			if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND &&
				ev.GetNamespace() == stored.GetNamespace() && ev.GetName() == stored.GetName() && ev.GetUid() == stored.GetUid() {
				return errBoundSeen
			}
			return nil
		})
		if errors.Is(err, errBoundSeen) {
			return nil
		}
		var ce *CompactedError
		if !errors.As(err, &ce) {
			return err
		}
		p, err := c.currentVerdict(ctx, stored)
		if p != nil || err != nil {
			return err // decided: the poll loop reads it too
		}
		from = ce.OldestRevision
	}
}

// currentVerdict reads the pod: a non-nil pod or error is the final
// answer; both nil means it is still waiting.
func (c *Client) currentVerdict(ctx context.Context, stored *berthv1.Pod) (*berthv1.Pod, error) {
	p, err := c.GetPod(ctx, stored.GetNamespace(), stored.GetName())
	if err != nil {
		return nil, err
	}
	if p.GetUid() != stored.GetUid() {
		return nil, fmt.Errorf("berth: pod %s/%s was deleted and submitted again (uid %s, waited for %s)",
			p.GetNamespace(), p.GetName(), p.GetUid(), stored.GetUid())
	}
	if _, v, err := verdict(p); v != nil || err != nil {
		return v, err
	}
	return nil, nil
}

// verdict reports whether p's phase is a decision, and which.
func verdict(p *berthv1.Pod) (done bool, _ *berthv1.Pod, _ error) {
	switch p.GetStatus().GetPhase() {
	case berthv1.PodPhase_POD_PHASE_BOUND, berthv1.PodPhase_POD_PHASE_RUNNING,
		berthv1.PodPhase_POD_PHASE_SUCCEEDED, berthv1.PodPhase_POD_PHASE_FAILED:
		return true, p, nil
	case berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE:
		return true, nil, &UnschedulableError{Pod: p}
	}
	return false, nil, nil
}
