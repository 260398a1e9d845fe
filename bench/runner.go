package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// runner runs one workload against one server.
type runner struct {
	bc      Config
	w       *workload
	run     string
	out     io.Writer
	cluster berthv1.ClusterServiceClient
	pods    berthv1.PodServiceClient
	sched   berthv1.SchedulerServiceClient
	health  healthpb.HealthClient
	t       *tracker
	// nodeNames and nodeIndex map node indexes to names and back.
	nodeNames []string
	nodeIndex map[string]int

	// unschedMsgs: why replayed pods were unschedulable when deleted.
	unschedMu   sync.Mutex
	unschedMsgs map[int32]string

	// progressEvery is the time between progress lines (0: a second);
	// progressExtra, when set, adds to each line (berth load: the server's
	// memory).
	progressEvery time.Duration
	progressExtra func() string
	// submitRetries is the submitter's retries of transient refusals.
	submitRetries int
	// serverCPU, when set, reads the CPU time the server has used so far
	// (berth load, which knows its pid): the measured phase's share is
	// reported per pod, a figure the load generator's own share of the
	// cores does not move the way it moves pods/s.
	serverCPU func() (time.Duration, error)
}

func newRunner(bc Config, w *workload, run string, conn grpc.ClientConnInterface, out io.Writer) *runner {
	return &runner{
		bc: bc, w: w, run: run, out: out,
		cluster: berthv1.NewClusterServiceClient(conn),
		pods:    berthv1.NewPodServiceClient(conn),
		sched:   berthv1.NewSchedulerServiceClient(conn),
		health:  healthpb.NewHealthClient(conn),
		t:       newTracker(),
	}
}

// runWorkload registers the nodes, binds the init pods, then submits and
// measures the measured pods (or replays the trace).
func runWorkload(ctx context.Context, bc Config, w *workload, run string, conn grpc.ClientConnInterface, out io.Writer) runResult {
	return newRunner(bc, w, run, conn, out).runWorkload(ctx)
}

func (r *runner) runWorkload(ctx context.Context) runResult {
	res := r.measureWorkload(ctx)
	if r.bc.Addr != "" && !r.bc.Keep {
		r.cleanupShared(ctx, time.Minute)
	}
	return res
}

// measureWorkload is runWorkload without the cleanup, for a caller that
// measures the server before it.
func (r *runner) measureWorkload(ctx context.Context) runResult {
	w := r.w
	res := runResult{workload: w.name, nodes: w.nodes, initPods: w.initPods, pods: w.pods}
	if w.trace == nil {
		res.rate = r.bc.Rate
	}
	res.err = r.execute(ctx, &res)
	if r.bc.timeline != nil {
		if err := r.t.writeTimeline(r.bc.timeline, w.name); err != nil && res.err == nil {
			res.err = fmt.Errorf("--timeline: %w", err)
		}
	}
	return res
}

// cleanupShared deletes what the run created, within limit even once ctx
// has ended: a shared server outlives the run, so leave it as it was.
func (r *runner) cleanupShared(ctx context.Context, limit time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	if err := r.cleanup(cctx); err != nil {
		fmt.Fprintf(r.out, "cleanup: %v\n", err)
	}
}

func (r *runner) execute(ctx context.Context, res *runResult) error {
	for _, n := range r.w.notes {
		fmt.Fprintf(r.out, "note: %s\n", n)
	}
	start := time.Now()
	lastRev, err := r.registerNodes(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.out, "registered %d nodes in %s\n", r.w.nodes, time.Since(start).Round(time.Millisecond))

	// Watch from the last node write: every binding of this run comes after.
	watchCtx, stopWatch := context.WithCancel(ctx)
	stream, err := r.sched.WatchBindings(watchCtx, &berthv1.WatchBindingsRequest{FromRevision: lastRev})
	if err != nil {
		stopWatch()
		return err
	}
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		r.t.watch(watchCtx, stream)
	}()
	ev := r.t.evict(watchCtx, r.pods, r.bc.Concurrency)
	defer func() {
		stopWatch()
		watching.Wait()
		res.evictErrors, _ = ev.wait()
		c := r.t.counts()
		res.evicts, res.deletes = c.evicts, c.deletes
	}()

	if r.w.trace != nil {
		err = r.replay(ctx, res)
	} else {
		err = r.phases(ctx, res)
	}
	if err != nil {
		return err
	}
	if r.w.check != nil {
		res.violations = r.w.check(r.placements())
	}
	return nil
}

// readServerCPU is serverCPU, or an error when there is none to read.
func (r *runner) readServerCPU() (time.Duration, error) {
	if r.serverCPU == nil {
		return 0, errors.New("no server process to read")
	}
	return r.serverCPU()
}

// phases binds the init pods, then measures the others.
func (r *runner) phases(ctx context.Context, res *runResult) error {
	if r.w.initPods > 0 {
		start := time.Now()
		if _, err := r.phase(ctx, phaseInit, r.w.initPods, r.w.initPod); err != nil {
			return fmt.Errorf("init pods: %w", err)
		}
		res.initDur = time.Since(start)
		fmt.Fprintf(r.out, "bound %d init pods in %s (not measured)\n", r.w.initPods, res.initDur.Round(time.Millisecond))
	}
	start := time.Now()
	floor := &floorProbe{health: r.health}
	if r.bc.Rate > 0 {
		floor.start(ctx)
	}
	cpuBefore, cpuErr := r.readServerCPU()
	submitDur, err := r.phase(ctx, phaseMeasured, r.w.pods, r.w.pod)
	if cpuAfter, afterErr := r.readServerCPU(); cpuErr == nil && afterErr == nil {
		res.serverCPU = cpuAfter - cpuBefore
	}
	res.floorLatencies = floor.finish()
	res.submitDur = submitDur
	r.measure(res, start)
	if err != nil {
		res.unschedulable = r.reportUnschedulable(ctx)
		hint := ""
		if r.w.expectEvictions && r.t.counts().evicts == 0 {
			hint = " (no EVICT event seen: does the scheduler preempt?)"
		}
		return fmt.Errorf("%w: %d of %d pods bound%s", err, res.bound, r.w.pods, hint)
	}
	return nil
}

// phase submits n pods built by build and waits until all are bound. It
// returns how long the submissions took.
func (r *runner) phase(ctx context.Context, phase podPhase, n int, build func(int) *berthv1.Pod) (time.Duration, error) {
	paced := r.bc.Rate > 0 && phase == phaseMeasured
	slots := make([]int32, n)
	if paced {
		for i := range n {
			slots[i] = r.t.add(build(i), phase)
		}
	}
	stopProgress := r.progress(phase, n)
	defer stopProgress()
	r.t.touch()
	start := time.Now()
	sub := newSubmitter(ctx, r.pods, r.t, r.bc.Concurrency)
	sub.retries = r.submitRetries
	if paced {
		ticker := time.NewTicker(pacerTick(r.bc.Rate))
		err := submitPaced(sub, &pacer{rate: r.bc.Rate, batch: r.bc.Batch}, start, ticker.C, slots)
		ticker.Stop()
		if err != nil {
			return time.Since(start), err
		}
	} else {
		// Pods are built a batch ahead of their call, not all first: at a
		// million pods the bench would otherwise hold them all at once.
		for lo := 0; lo < n; lo += r.bc.Batch {
			hi := min(lo+r.bc.Batch, n)
			for i := lo; i < hi; i++ {
				slots[i] = r.t.add(build(i), phase)
			}
			sub.submit(slots[lo:hi])
		}
		if err := sub.wait(); err != nil {
			return time.Since(start), err
		}
	}
	submitDur := time.Since(start)
	return submitDur, r.t.waitFor(ctx, r.bc.Stall, func(c trackerCounts) bool { return c.bound[phase] >= n })
}

// submitPaced sends slots at the pacer's rate from start, stamping each
// pod with its due time before its call can block on the calls in flight,
// and waits for every call to be acknowledged.
func submitPaced(sub *submitter, p *pacer, start time.Time, ticks <-chan time.Time, slots []int32) error {
	err := p.run(sub.ctx, start, ticks, len(slots), func(lo, hi int) {
		sub.t.stampDue(slots[lo:hi], func(k int) time.Time { return p.dueAt(lo + k) })
		sub.submit(slots[lo:hi])
	})
	// A failed call ends the pacer too: its error, not the pacer's, says why.
	if werr := sub.wait(); werr != nil {
		return werr
	}
	return err
}

// measure fills the throughput and latency of the measured pods bound so
// far, counted from start.
func (r *runner) measure(res *runResult, start time.Time) {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	res.latencies = res.latencies[:0]
	res.callLatencies = res.callLatencies[:0]
	res.ackLatencies, res.afterAckLatencies = res.ackLatencies[:0], res.afterAckLatencies[:0]
	var last int64
	var pace sendPace
	for i := range r.t.pods {
		p := &r.t.pods[i]
		if p.phase != phaseMeasured {
			continue
		}
		pace.add(p)
		if p.boundAt == 0 {
			continue
		}
		res.latencies = append(res.latencies, p.latency())
		if p.due != 0 {
			res.callLatencies = append(res.callLatencies, p.callLatency())
			if call, rest := p.ackSplit(); call > 0 {
				res.ackLatencies = append(res.ackLatencies, call)
				res.afterAckLatencies = append(res.afterAckLatencies, rest)
			}
		}
		last = max(last, p.boundAt)
	}
	res.bound = len(res.latencies)
	slices.Sort(res.latencies)
	slices.Sort(res.callLatencies)
	slices.Sort(res.ackLatencies)
	slices.Sort(res.afterAckLatencies)
	if res.rate > 0 {
		res.sentRate, res.sendLag = pace.rate(res.rate)
	}
	if last > 0 {
		res.elapsed = time.Unix(0, last).Sub(start)
	}
}

// sendPace follows when paced pods were due and when their calls started.
type sendPace struct {
	sent                  int   // pods whose call started
	firstDue              int64 // unix nanos
	lastCall, lastCallDue int64 // the latest call start, and that pod's due time
}

func (s *sendPace) add(p *podRecord) {
	if p.due == 0 || p.submitted == 0 {
		return
	}
	if s.sent == 0 || p.due < s.firstDue {
		s.firstDue = p.due
	}
	if p.submitted > s.lastCall {
		s.lastCall, s.lastCallDue = p.submitted, p.due
	}
	s.sent++
}

// rate is the pods sent per second, from the first one's due time to the
// last call's start plus one slot (so a pacer on time gives --rate), and
// how late the last call started. Zero when nothing was sent.
func (s *sendPace) rate(offered float64) (float64, time.Duration) {
	if s.sent == 0 {
		return 0, 0
	}
	span := time.Duration(s.lastCall-s.firstDue) + time.Duration(float64(time.Second)/offered)
	return float64(s.sent) / span.Seconds(), time.Duration(s.lastCall - s.lastCallDue)
}

// placements lists where every pod of the run is, in slot order.
func (r *runner) placements() []placement {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	out := make([]placement, len(r.t.pods))
	for i, p := range r.t.pods {
		out[i] = placement{phase: p.phase, node: -1}
		if p.boundAt != 0 && !p.deleted {
			if n, ok := r.nodeIndex[p.node]; ok {
				out[i].node = n
			}
		}
	}
	return out
}

// reportUnschedulable counts the run's measured pods the server marks
// unschedulable and prints the diagnosis of the first, so a failed run says
// why.
func (r *runner) reportUnschedulable(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var n int
	var sample *berthv1.Pod
	req := &berthv1.ListPodsRequest{Namespace: measuredNamespace, Phase: berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE, PageSize: 5000}
	for {
		resp, err := r.pods.ListPods(ctx, req)
		if err != nil {
			fmt.Fprintf(r.out, "list unschedulable pods: %v\n", err)
			return n
		}
		for _, p := range resp.GetPods() {
			if strings.HasPrefix(p.GetName(), r.run+"-") {
				n++
				if sample == nil {
					sample = p
				}
			}
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if sample != nil {
		fmt.Fprintf(r.out, "%d measured pods unschedulable; e.g. %s: %s\n", n, sample.GetName(), sample.GetStatus().GetMessage())
	}
	return n
}

// progress prints a line a second until the returned func is called.
func (r *runner) progress(phase podPhase, n int) func() {
	if r.bc.Quiet {
		return func() {}
	}
	name := map[podPhase]string{phaseInit: "init", phaseMeasured: "measured"}[phase]
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := r.progressEvery
		if every <= 0 {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		prev := r.t.counts().bound[phase]
		for {
			select {
			case <-done:
				return
			case <-t.C:
				c := r.t.counts()
				rate := float64(c.bound[phase]-prev) / every.Seconds()
				line := fmt.Sprintf("  %s: submitted %d/%d  bound %d  (%.0f pods/s)", name, c.sent[phase], n, c.bound[phase], rate)
				if c.evicts > 0 || c.deletes > 0 {
					line += fmt.Sprintf("  evicted %d  deleted %d", c.evicts, c.deletes)
				}
				if c.retried > 0 {
					line += fmt.Sprintf("  retried %d", c.retried)
				}
				if r.progressExtra != nil {
					line += "  " + r.progressExtra()
				}
				fmt.Fprintln(r.out, line)
				prev = c.bound[phase]
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// registerNodes upserts every node with 64 calls in flight and returns
// the highest revision written.
func (r *runner) registerNodes(ctx context.Context) (int64, error) {
	nodes := make([]*berthv1.Node, r.w.nodes)
	r.nodeNames = make([]string, r.w.nodes)
	r.nodeIndex = make(map[string]int, r.w.nodes)
	for i := range nodes {
		nodes[i] = r.w.node(i)
		r.nodeNames[i] = nodes[i].GetName()
		r.nodeIndex[r.nodeNames[i]] = i
	}
	var maxRev atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, n := range nodes {
		g.Go(func() error {
			resp, err := r.cluster.UpsertNode(gctx, &berthv1.UpsertNodeRequest{Node: n})
			if err != nil {
				return fmt.Errorf("upsert node %d: %w", i, err)
			}
			for {
				cur := maxRev.Load()
				if resp.GetRevision() <= cur || maxRev.CompareAndSwap(cur, resp.GetRevision()) {
					return nil
				}
			}
		})
	}
	err := g.Wait()
	return maxRev.Load(), err
}

// cleanup deletes what the run created, for runs against a shared server.
func (r *runner) cleanup(ctx context.Context) error {
	r.t.mu.Lock()
	var pods []*berthv1.DeletePodRequest
	for _, p := range r.t.pods {
		if p.submitted != 0 && !p.deleted {
			pods = append(pods, &berthv1.DeletePodRequest{Namespace: p.namespace, Name: p.name})
		}
	}
	r.t.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for _, req := range pods {
		g.Go(func() error {
			_, err := r.pods.DeletePod(gctx, req)
			return ignoreNotFound(err)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(64)
	for name := range r.nodeIndex {
		g.Go(func() error {
			_, err := r.cluster.DeleteNode(gctx, &berthv1.DeleteNodeRequest{Name: name})
			return ignoreNotFound(err)
		})
	}
	return g.Wait()
}

// submitter sends SubmitPods calls with a bounded number in flight, each
// from one of a fixed set of goroutines. A goroutine per call grew a fresh
// stack through gRPC's client path every time, a fifth of the submitting's
// CPU at 5,500 pods/s, taken from the server it shares the machine with.
type submitter struct {
	ctx    context.Context
	cancel context.CancelFunc
	pods   berthv1.PodServiceClient
	t      *tracker
	// batches hands a batch to an idle caller; unbuffered, so submit
	// blocks while every caller is busy.
	batches chan []int32
	callers sync.WaitGroup
	errOnce sync.Once
	err     error // the first failure; it cancels ctx
	// retries is how many times a batch, or the pods of it refused for a
	// transient reason, are sent again (0: a refusal fails the run, as the
	// bench wants: it measures a server that keeps up).
	retries int
}

func newSubmitter(ctx context.Context, pods berthv1.PodServiceClient, t *tracker, concurrency int) *submitter {
	ctx, cancel := context.WithCancel(ctx)
	s := &submitter{ctx: ctx, cancel: cancel, pods: pods, t: t, batches: make(chan []int32)}
	for range concurrency {
		s.callers.Go(func() {
			for slots := range s.batches {
				if err := s.send(slots); err != nil {
					s.errOnce.Do(func() {
						s.err = err
						s.cancel()
					})
				}
			}
		})
	}
	return s
}

// submit sends one batch; it blocks while the limit of calls is in flight.
// After a failure the batches still go to the callers, which drop them.
func (s *submitter) submit(slots []int32) { s.batches <- slots }

// send makes one batch's calls, retrying as s.retries allows.
func (s *submitter) send(slots []int32) error {
	for attempt := 0; ; attempt++ {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		retry := attempt < s.retries
		resp, err := s.pods.SubmitPods(s.ctx, &berthv1.SubmitPodsRequest{Pods: s.t.startSubmit(slots)})
		if err != nil && !(retry && transient(status.Code(err))) {
			return fmt.Errorf("submit %d pods: %w", len(slots), err)
		}
		if err == nil {
			if slots, err = s.t.ackedOrRetry(slots, resp.GetResults(), retry); err != nil || len(slots) == 0 {
				return err
			}
		}
		if err := s.backoff(attempt); err != nil {
			return err
		}
	}
}

// backoff waits before retry attempt+1: 50ms doubling to 2s.
func (s *submitter) backoff(attempt int) error {
	t := time.NewTimer(min(50*time.Millisecond<<min(attempt, 6), 2*time.Second))
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return s.ctx.Err()
	case <-t.C:
		return nil
	}
}

// wait returns once every batch is acknowledged, with the first failure.
// It submits nothing more: call it once, after the last submit.
func (s *submitter) wait() error {
	close(s.batches)
	s.callers.Wait()
	s.cancel()
	return s.err
}

// firstLine shortens an error for the summary table.
func firstLine(err error) string {
	if err == nil {
		return "ok"
	}
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "timeout: " + msg
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
