package e2e

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Issue 12: no client can topple Berth with streams it abandons, watchers
// that never read, or more calls than it can take.

// startBerthWithMetrics is startBerth with the metrics listener on, for
// tests that judge the process by its own gauges. The later flag wins.
func startBerthWithMetrics(t *testing.T, extra ...string) (*proc, string) {
	t.Helper()
	maddr := freeAddr(t)
	return startBerth(t, t.TempDir(), append([]string{"--metrics-listen", maddr}, extra...)...), maddr
}

// metricsHTTP keeps no idle connections, whose goroutines would outlive
// the test.
var metricsHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// scrape reads the unlabelled samples of the named metrics.
func scrape(t *testing.T, maddr string, names ...string) map[string]float64 {
	t.Helper()
	resp, err := metricsHTTP.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric %s: %v", name, err)
		}
		out[name] = v
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Fatalf("metric %s not exported", n)
		}
	}
	return out
}

// shedTotal sums berth_admission_shed_total over its labels.
func shedTotal(t *testing.T, maddr string) float64 {
	t.Helper()
	resp, err := metricsHTTP.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "berth_admission_shed_total{") {
			continue
		}
		_, v, _ := strings.Cut(strings.TrimSpace(line), "} ")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("shed metric %q: %v", line, err)
		}
		sum += f
	}
	return sum
}

// stopWithin sends SIGTERM and waits for a clean exit within d.
func (p *proc) stopWithin(d time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("berth did not exit within %v of SIGTERM:\n%s", d, p.logs())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("berth exited with %d after SIGTERM:\n%s", code, p.logs())
	}
	return time.Since(start)
}

// Ten thousand watch streams opened by a client process that then dies:
// the server returns to its baseline goroutines with no subscriber left,
// and SIGTERM, with streams open, ends it within its grace.
func TestE2EAbandonedWatchStreamsAreFreed(t *testing.T) {
	const streams = 10000
	flood := filepath.Join(t.TempDir(), "watchflood")
	if out, err := exec.Command("go", "build", "-o", flood, "./testdata/watchflood").CombinedOutput(); err != nil {
		t.Fatalf("build watchflood: %v\n%s", err, out)
	}
	p, maddr := startBerthWithMetrics(t, "--max-streams", "20000", "--max-streams-per-client", "20000")
	c := newClients(t, p.addr)

	// The binding fan-out starts with the first subscriber and stays: the
	// baseline is taken after one has come and gone.
	warm := watch(t, c, 0)
	pollUntil(t, 10*time.Second, "warm-up subscriber", func() error { return gauge(t, maddr, "berth_watch_subscribers", 1) })
	warm.cancel()
	<-warm.done
	pollUntil(t, 10*time.Second, "warm-up subscriber gone", func() error { return gauge(t, maddr, "berth_watch_subscribers", 0) })
	baseline := scrape(t, maddr, "go_goroutines")["go_goroutines"]

	cmd := exec.Command(flood, "-addr", p.addr, "-streams", strconv.Itoa(streams))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := runWithin(cmd, 60*time.Second)
	if err != nil || !strings.Contains(out, fmt.Sprintf("opened %d", streams)) {
		t.Fatalf("watchflood: %v: %s %s", err, out, stderr.String())
	}
	exited := time.Now()
	// Goroutines a connection or stream holds are gone; a few of the
	// runtime's and the metrics handler's may come and go.
	const slack = 40
	var peak float64
	pollUntil(t, 30*time.Second, "streams of the dead client freed", func() error {
		m := scrape(t, maddr, "go_goroutines", "berth_watch_subscribers")
		peak = max(peak, m["go_goroutines"])
		if m["berth_watch_subscribers"] != 0 || m["go_goroutines"] > baseline+slack {
			return fmt.Errorf("%v subscribers, %v goroutines (baseline %v)", m["berth_watch_subscribers"], m["go_goroutines"], baseline)
		}
		return nil
	})
	t.Logf("%d streams of a dead client freed in %v; goroutines baseline %v, highest seen after exit %v",
		streams, time.Since(exited).Round(time.Millisecond), baseline, peak)

	// Open streams must not hold up a graceful stop.
	for range 5 {
		watch(t, c, 0)
	}
	pollUntil(t, 10*time.Second, "subscribers before SIGTERM", func() error { return gauge(t, maddr, "berth_watch_subscribers", 5) })
	// The default grace is 10s; a stop that had to wait it out would log so.
	took := p.stopWithin(10 * time.Second)
	t.Logf("SIGTERM with 5 streams open: exited in %v", took.Round(time.Millisecond))
	if strings.Contains(p.logs(), "graceful stop timed out") {
		t.Errorf("graceful stop waited out its grace on open streams:\n%s", p.logs())
	}
}

func gauge(t *testing.T, maddr, name string, want float64) error {
	if got := scrape(t, maddr, name)[name]; got != want {
		return fmt.Errorf("%s = %v, want %v", name, got, want)
	}
	return nil
}

// runWithin runs cmd and returns its stdout, killing it past d.
func runWithin(cmd *exec.Cmd, d time.Duration) (string, error) {
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stdout.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return stdout.String(), fmt.Errorf("still running after %v", d)
	}
}

// registerNodes adds n nodes of 110 pod slots each.
func registerNodes(t *testing.T, c clients, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.cluster.UpsertNode(ctxT(t, 10*time.Second), &berthv1.UpsertNodeRequest{Node: testNode(fmt.Sprintf("node-%03d", i), 1_000_000)}); err != nil {
			t.Fatal(err)
		}
	}
}

// submitAll stores pods in batches of 100. A batch whose etcd write timed
// out on this busy machine is sent again: a resubmit of the same spec is
// idempotent.
func submitAll(t *testing.T, c clients, prefix string, n int) {
	t.Helper()
	for start := 0; start < n; start += 100 {
		var batch []*berthv1.Pod
		for i := start; i < min(start+100, n); i++ {
			batch = append(batch, testPod(fmt.Sprintf("%s-%05d", prefix, i), 10))
		}
		for attempt := 1; ; attempt++ {
			failed := submitPodBatch(t, c, batch)
			if failed == nil {
				break
			}
			if attempt == 5 {
				t.Fatalf("submit pods, attempt %d: %v", attempt, failed)
			}
		}
	}
}

// submitPodBatch returns the first retryable failure; any other fails the test.
func submitPodBatch(t *testing.T, c clients, batch []*berthv1.Pod) error {
	t.Helper()
	resp, err := c.pods.SubmitPods(ctxT(t, 30*time.Second), &berthv1.SubmitPodsRequest{Pods: batch})
	if status.Code(err) == codes.Unavailable {
		return err
	}
	if err != nil {
		t.Fatalf("submit pods: %v", err)
	}
	var failed error
	for _, r := range resp.GetResults() {
		switch codes.Code(r.GetCode()) {
		case codes.OK:
		case codes.Unavailable:
			failed = cmp.Or(failed, errors.New(r.GetMessage()))
		default:
			t.Fatalf("submit pod: code %d: %s", r.GetCode(), r.GetMessage())
		}
	}
	return failed
}

// slowWatcher is a raw stream on a connection of its own with fixed, small
// flow-control windows, which the test does not read until the binding is
// over: the server's sends to it block once the windows are full.
type slowWatcher struct {
	stream grpc.ServerStreamingClient[berthv1.WatchBindingsResponse]
	cancel context.CancelFunc
}

func openSlowWatcher(t *testing.T, addr string, from int64) *slowWatcher {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := berthv1.NewSchedulerServiceClient(conn).WatchBindings(ctx, &berthv1.WatchBindingsRequest{FromRevision: from})
	if err != nil {
		t.Fatal(err)
	}
	return &slowWatcher{stream: stream, cancel: cancel}
}

// drain reads what the server sent before it ended the stream, and the
// status it ended with.
func (w *slowWatcher) drain() ([]*berthv1.BindingEvent, error) {
	var evs []*berthv1.BindingEvent
	for {
		resp, err := w.stream.Recv()
		if err != nil {
			return evs, err
		}
		if ev := resp.GetEvent(); ev != nil {
			evs = append(evs, ev)
		}
	}
}

// resumeRevision reads a WATCH_FELL_BEHIND status.
func resumeRevision(err error) (int64, bool) {
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "WATCH_FELL_BEHIND" {
			rev, perr := strconv.ParseInt(info.GetMetadata()["resume_revision"], 10, 64)
			return rev, perr == nil
		}
	}
	return 0, false
}

// Watchers that stop reading while 20,000 pods bind cost the server no
// more than its bounded buffer: the heap stays under a fixed bound, each
// slow watcher is cut off with where to resume, and resuming from there it
// sees every binding once and in order.
func TestE2ESlowWatchersAreCutOffAndResume(t *testing.T) {
	const (
		pods    = 20000
		slow    = 3
		heapCap = 450 << 20
	)
	p, maddr := startBerthWithMetrics(t, "--watch-buffer", "4096", "--watch-max-lag", "2s", "--etcd-request-timeout", "30s")
	c := newClients(t, p.addr)
	registerNodes(t, c, 200)
	// From 0 with no pod bound yet: an empty listing, then every binding
	// as a live event.
	const from = 0
	var slows []*slowWatcher
	for range slow {
		slows = append(slows, openSlowWatcher(t, p.addr, from))
	}
	fast := watch(t, c, from)
	pollUntil(t, 10*time.Second, "watchers subscribed", func() error { return gauge(t, maddr, "berth_watch_subscribers", slow+1) })
	before := scrape(t, maddr, "go_memstats_heap_inuse_bytes")["go_memstats_heap_inuse_bytes"]

	var peak atomic.Int64
	stopSampling := sampleMax(t, maddr, "go_memstats_heap_inuse_bytes", &peak)
	submitAll(t, c, "slow", pods)
	fast.waitFor(t, 120*time.Second, "every pod bound", func(evs []*berthv1.BindingEvent) bool { return len(boundCount(evs)) == pods })
	// The slow watchers are cut off once their sends have blocked past the
	// lag bound; only the fast one remains.
	pollUntil(t, 30*time.Second, "slow watchers cut off", func() error { return gauge(t, maddr, "berth_watch_subscribers", 1) })
	stopSampling()
	t.Logf("heap in use: %.0f MB before, at most %.0f MB while %d pods bound with %d watchers not reading",
		before/(1<<20), float64(peak.Load())/(1<<20), pods, slow)
	if peak.Load() > heapCap {
		t.Errorf("heap reached %d MB, over the %d MB bound", peak.Load()>>20, heapCap>>20)
	}

	for i, w := range slows {
		first, err := w.drain()
		resume, ok := resumeRevision(err)
		if !ok {
			t.Fatalf("slow watcher %d ended with %v, want ResourceExhausted WATCH_FELL_BEHIND", i, err)
		}
		second := watchUntilBound(t, c, resume, pods, first)
		t.Logf("slow watcher %d: %d events before the cut-off, resumed from revision %d for %d more", i, len(first), resume, len(second))
		checkOnceInOrder(t, i, first, second, resume, pods)
	}

	// A watcher stuck mid-listing (20,000 bound pods, windows full) must
	// not hold up a graceful stop.
	stuck := openSlowWatcher(t, p.addr, 0)
	if _, err := stuck.stream.Header(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 10*time.Second, "stuck watcher subscribed", func() error { return gauge(t, maddr, "berth_watch_subscribers", 2) })
	took := p.stopWithin(10 * time.Second)
	t.Logf("SIGTERM with a watcher stuck mid-listing: exited in %v", took.Round(time.Millisecond))
	if strings.Contains(p.logs(), "graceful stop timed out") {
		t.Errorf("graceful stop waited out its grace on a stuck watcher:\n%s", p.logs())
	}
}

// sampleMax records the highest value of a gauge until the returned func
// is called.
func sampleMax(t *testing.T, maddr, name string, peak *atomic.Int64) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			resp, err := metricsHTTP.Get("http://" + maddr + "/metrics")
			if err == nil {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
						if f, perr := strconv.ParseFloat(v, 64); perr == nil && int64(f) > peak.Load() {
							peak.Store(int64(f))
						}
					}
				}
				resp.Body.Close()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return sync.OnceFunc(func() { close(stop); <-done })
}

// watchUntilBound resumes from rev until, with what came before, every pod
// has a BOUND event.
func watchUntilBound(t *testing.T, c clients, rev int64, pods int, before []*berthv1.BindingEvent) []*berthv1.BindingEvent {
	t.Helper()
	have := boundCount(before)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := c.sched.WatchBindings(ctx, &berthv1.WatchBindingsRequest{FromRevision: rev})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*berthv1.BindingEvent
	for len(have) < pods {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("resumed watch from %d: %v after %d events (%d pods of %d)", rev, err, len(evs), len(have), pods)
		}
		if ev := resp.GetEvent(); ev != nil {
			evs = append(evs, ev)
			if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
				have[ev.GetNamespace()+"/"+ev.GetName()]++
			}
		}
	}
	return evs
}

// checkOnceInOrder: across both segments, revisions never go back, and
// every pod is BOUND exactly once, except that the events of the one
// revision after resume may repeat (the server's stated contract: a cut-off
// can split a transaction's events), which a client skips by key.
func checkOnceInOrder(t *testing.T, i int, first, second []*berthv1.BindingEvent, resume int64, pods int) {
	t.Helper()
	seenFirst := map[string]bool{}
	var last int64
	for _, ev := range first {
		if ev.GetRevision() < last {
			t.Fatalf("slow watcher %d: revision %d after %d", i, ev.GetRevision(), last)
		}
		last = ev.GetRevision()
		seenFirst[ev.GetNamespace()+"/"+ev.GetName()] = true
	}
	if last < resume {
		t.Errorf("slow watcher %d: resume revision %d is past the last event received (%d)", i, resume, last)
	}
	repeatRev := int64(0)
	if len(second) > 0 {
		repeatRev = second[0].GetRevision()
	}
	merged := append([]*berthv1.BindingEvent(nil), first...)
	last = 0
	for _, ev := range second {
		if ev.GetRevision() <= resume {
			t.Fatalf("slow watcher %d: resumed from %d got revision %d", i, resume, ev.GetRevision())
		}
		if ev.GetRevision() < last {
			t.Fatalf("slow watcher %d: resumed revision %d after %d", i, ev.GetRevision(), last)
		}
		last = ev.GetRevision()
		if ev.GetRevision() == repeatRev && seenFirst[ev.GetNamespace()+"/"+ev.GetName()] {
			continue // the split revision, sent again
		}
		merged = append(merged, ev)
	}
	counts := boundCount(merged)
	if len(counts) != pods {
		t.Errorf("slow watcher %d: %d pods bound across both segments, want %d", i, len(counts), pods)
	}
	for pod, n := range counts {
		if n != 1 {
			t.Errorf("slow watcher %d: pod %s bound %d times", i, pod, n)
		}
	}
}

// Ten times what the server is allowed to take at once: memory stays
// bounded, the excess is shed with ResourceExhausted, and every pod whose
// submit was acknowledged is stored and bound.
func TestE2EOverloadIsShed(t *testing.T) {
	const (
		maxInFlight = 8
		workers     = 400 // 10x what is let in or may wait (8 + 32)
		perWorker   = 10
		rssCap      = 256 << 20
	)
	p, maddr := startBerthWithMetrics(t, "--max-inflight", strconv.Itoa(maxInFlight), "--max-wait", "200ms")
	c := newClients(t, p.addr)
	registerNodes(t, c, 40)
	before := scrape(t, maddr, "process_resident_memory_bytes")["process_resident_memory_bytes"]

	var peak atomic.Int64
	stopSampling := sampleMax(t, maddr, "process_resident_memory_bytes", &peak)
	var acked sync.Map
	var ok, shed, other atomic.Int64
	var firstOther atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				name := fmt.Sprintf("load-%03d-%02d", w, i)
				_, err := c.pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: testPod(name, 10)})
				cancel()
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
					acked.Store("e2e/"+name, true)
				case codes.ResourceExhausted:
					shed.Add(1)
				default:
					if other.Add(1) == 1 {
						firstOther.Store(err)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopSampling()
	total := workers * perWorker
	t.Logf("%d SubmitPod calls from %d workers in %v: %d acknowledged, %d shed (%.0f%%), %d other; RSS %.0f MB before, at most %.0f MB; berth_admission_shed_total %v",
		total, workers, elapsed.Round(time.Millisecond), ok.Load(), shed.Load(), 100*float64(shed.Load())/float64(total), other.Load(),
		before/(1<<20), float64(peak.Load())/(1<<20), shedTotal(t, maddr))
	if shed.Load() == 0 {
		t.Errorf("no call was shed at %dx the in-flight limit", workers/maxInFlight)
	}
	if ok.Load() == 0 {
		t.Fatalf("no call was acknowledged")
	}
	if other.Load() > 0 {
		// A short deadline can expire while a call waits for its commit;
		// that is an honest answer, not a failure of shedding.
		if err, _ := firstOther.Load().(error); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%d calls failed otherwise, first: %v", other.Load(), err)
		}
	}
	if got := shedTotal(t, maddr); got < float64(shed.Load()) {
		t.Errorf("berth_admission_shed_total %v, fewer than the %d shed calls seen", got, shed.Load())
	}
	if peak.Load() > rssCap {
		t.Errorf("RSS reached %d MB, over the %d MB bound", peak.Load()>>20, rssCap>>20)
	}

	// Every acknowledged pod is stored and bound.
	pollUntil(t, 60*time.Second, "acknowledged pods bound", func() error {
		stored := listAllPods(t, c)
		var missing, unbound int
		acked.Range(func(k, _ any) bool {
			p, found := stored[k.(string)]
			switch {
			case !found:
				missing++
			case p.GetNodeName() == "":
				unbound++
			}
			return true
		})
		if missing > 0 {
			t.Fatalf("%d acknowledged pods missing", missing)
		}
		if unbound > 0 {
			return fmt.Errorf("%d acknowledged pods not bound yet", unbound)
		}
		return nil
	})
}
