package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/bench/trace"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// tracePollInterval is how often a replayed deletion asks whether a pod
// that has not bound was found unschedulable; WatchBindings carries only
// bindings, so that takes a GetPod.
const tracePollInterval = 10 * time.Millisecond

// traceDeletersPerCall is how many deletion workers run per SubmitPods
// call allowed in flight.
const traceDeletersPerCall = 4

// replay plays the trace's creations and deletions in trace order, as fast
// as the server allows (time is compressed to nothing). Creations go out in
// batches of --batch; a deletion is handed to a deleter, which waits until
// its pod is bound or marked unschedulable and then deletes it. At most
// --trace-window deletions wait at once; when they are full the creations
// wait too, so the replay never runs far ahead of the cluster the trace
// describes (at most about window + batch pods more are alive than in the
// trace). A pod deleted without ever binding counts as unschedulable.
func (r *runner) replay(ctx context.Context, res *runResult) error {
	tr := r.w.trace
	slots := make([]int32, len(tr.Pods))
	for i, p := range tr.Pods {
		slots[i] = r.t.add(tracePodToWire(r.run, p), phaseMeasured)
	}
	stopProgress := r.progress(phaseMeasured, len(tr.Pods))
	defer stopProgress()

	g, gctx := errgroup.WithContext(ctx)
	deletions := make(chan int32, r.bc.TraceWindow)
	// Deleters mostly wait for pods to bind; more of them than submitters
	// keeps deletions from pacing the replay.
	for range traceDeletersPerCall * r.bc.Concurrency {
		g.Go(func() error {
			for slot := range deletions {
				if err := r.retire(gctx, slot); err != nil {
					return err
				}
			}
			return nil
		})
	}

	r.t.touch()
	start := time.Now()
	sub := newSubmitter(gctx, r.pods, r.t, r.bc.Concurrency)
	loopErr := r.feed(gctx, slots, sub, deletions)
	close(deletions)
	errSub := sub.wait()
	errDel := g.Wait()
	res.replayDur = time.Since(start)
	for _, err := range []error{errSub, errDel, loopErr} {
		if err != nil {
			r.measure(res, start)
			res.unschedulable = res.pods - res.bound
			return fmt.Errorf("trace replay: %w (%d of %d pods bound)", err, res.bound, res.pods)
		}
	}
	// A pod deleted while pending leaves no event, so the watch is fenced
	// with a write of its own before the count of bound pods is final.
	if err := r.fence(ctx); err != nil {
		return fmt.Errorf("trace replay: %w", err)
	}
	r.measure(res, start)
	res.unschedulable = res.pods - res.bound
	if res.unschedulable > 0 {
		fmt.Fprintf(r.out, "e.g. %s\n", r.unschedulableExample())
	}
	fmt.Fprintf(r.out, "replayed %d events in %s (%.0f events/s); %d pods bound, %d deleted without binding (unschedulable)\n",
		len(tr.Events), res.replayDur.Round(time.Millisecond), float64(len(tr.Events))/res.replayDur.Seconds(), res.bound, res.unschedulable)
	return nil
}

// feed hands the trace's events out in order: creations to sub, in
// batches, and deletions to the deleters, until the events or ctx end.
func (r *runner) feed(ctx context.Context, slots []int32, sub *submitter, deletions chan<- int32) error {
	var batch []int32
	flush := func() {
		if len(batch) > 0 {
			sub.submit(batch)
			batch = nil // the submitter owns the old slice now
		}
	}
	for _, ev := range r.w.trace.Events {
		slot := slots[ev.Pod]
		if ev.Kind == trace.Create {
			if batch = append(batch, slot); len(batch) >= r.bc.Batch {
				flush()
			}
			continue
		}
		// A deleter waits for its pod's submission, which may sit in the
		// unsent batch: flush before blocking on a full window.
		select {
		case deletions <- slot:
			continue
		default:
		}
		flush()
		select {
		case deletions <- slot:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	flush()
	return nil
}

// fence submits a pod declared bound to the first node, waits until the
// watch delivers it, so every event before it has been seen, and deletes
// it again.
func (r *runner) fence(ctx context.Context) error {
	p := &berthv1.Pod{
		Namespace: measuredNamespace, Name: r.run + "-fence", NodeName: r.nodeNames[0],
		Containers: []*berthv1.Container{{Name: "main", Image: "registry.example/fence:1"}},
	}
	resp, err := r.pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: p})
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	want := resp.GetRevision()
	if err := r.t.waitFor(ctx, r.bc.Stall, func(c trackerCounts) bool { return c.rev >= want }); err != nil {
		return fmt.Errorf("fence: waiting for the watch to reach revision %d: %w", want, err)
	}
	_, err = r.pods.DeletePod(ctx, &berthv1.DeletePodRequest{Namespace: p.Namespace, Name: p.Name, Uid: resp.GetPod().GetUid()})
	return ignoreNotFound(err)
}

// retire deletes a replayed pod once the scheduler has decided on it, and
// counts it.
func (r *runner) retire(ctx context.Context, slot int32) error {
	if err := r.settle(ctx, slot); err != nil {
		return err
	}
	rec := r.t.record(slot)
	_, err := r.pods.DeletePod(ctx, &berthv1.DeletePodRequest{
		Namespace: rec.pod.GetNamespace(), Name: rec.pod.GetName(), Uid: rec.uid,
	})
	if err := ignoreNotFound(err); err != nil {
		return fmt.Errorf("delete %s: %w", rec.pod.GetName(), err)
	}
	r.t.deleted()
	return nil
}

// settle waits until the pod is bound, or its stored phase shows the
// scheduler tried and found no node.
func (r *runner) settle(ctx context.Context, slot int32) error {
	var poll *time.Ticker
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for pollDue := false; ; {
		rec, changed, werr := r.t.slot(slot)
		if werr != nil {
			return werr
		}
		if rec.boundAt != 0 {
			return nil
		}
		var tick <-chan time.Time
		if rec.acked {
			if pollDue {
				resp, err := r.pods.GetPod(ctx, &berthv1.GetPodRequest{Namespace: rec.pod.GetNamespace(), Name: rec.pod.GetName()})
				if err != nil {
					return fmt.Errorf("get %s: %w", rec.pod.GetName(), err)
				}
				switch resp.GetPod().GetStatus().GetPhase() {
				case berthv1.PodPhase_POD_PHASE_PENDING, berthv1.PodPhase_POD_PHASE_UNSPECIFIED:
				case berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE:
					r.noteUnschedulable(slot, resp.GetPod().GetStatus().GetMessage())
					return nil
				default:
					return nil
				}
				pollDue = false
			}
			if poll == nil {
				poll = time.NewTicker(tracePollInterval)
			}
			tick = poll.C
		}
		if c := r.t.counts(); r.bc.Stall > 0 && time.Since(c.lastProgress) > r.bc.Stall {
			return fmt.Errorf("%w for %s (pod %s still pending)", errStalled, r.bc.Stall, rec.pod.GetName())
		}
		select {
		case <-changed:
		case <-tick:
			pollDue = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func ignoreNotFound(err error) error {
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// noteUnschedulable keeps why a replayed pod was unschedulable when it was
// deleted.
func (r *runner) noteUnschedulable(slot int32, msg string) {
	r.unschedMu.Lock()
	defer r.unschedMu.Unlock()
	if r.unschedMsgs == nil {
		r.unschedMsgs = map[int32]string{}
	}
	r.unschedMsgs[slot] = msg
}

// unschedulableExample describes the first pod that never bound.
func (r *runner) unschedulableExample() string {
	r.unschedMu.Lock()
	defer r.unschedMu.Unlock()
	for slot := range int32(len(r.t.pods)) {
		if rec := r.t.record(slot); rec.boundAt == 0 {
			return fmt.Sprintf("%s (requests %v): %s", rec.pod.GetName(), rec.pod.GetContainers()[0].GetRequests(), r.unschedMsgs[slot])
		}
	}
	return ""
}
