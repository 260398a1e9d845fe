package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/internal/cgroup"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
)

// WorkloadScale names berth load's runs in its summary and JSON: the
// basic workload's nodes and pods, at a size that tests memory and restart.
const WorkloadScale = "scale"

// LoadConfig is one berth load run; its fields are the command's flags.
type LoadConfig struct {
	// Server starts `berth serve` as a child; ServeArgs are added to the
	// flags the run gives it (listen address, data directory, replica id).
	Server    ServerCommand
	ServeArgs []string
	// Addr targets a running server instead, PID (0: none) the process
	// whose memory is reported. Restarts need a child and are skipped.
	Addr string
	PID  int
	// Nodes and Pods are the basic workload's sizes.
	Nodes, Pods int
	// Batch pods go in one SubmitPods call, Concurrency calls in flight.
	Batch, Concurrency int
	// Restarts, after the load: SIGTERM then SIGKILL the child, and time
	// each restart on the same data to SERVING and to a new pod's binding.
	// RestartRounds such pairs are timed (0 counts as 1), each on the data
	// the last one left; more than one also reports their spread.
	Restarts      bool
	RestartRounds int
	// Progress is the time between progress lines.
	Progress time.Duration
	// Timeout bounds the whole run; Stall (0: none) ends a load in which no
	// pod binds for that long; StartTimeout bounds each start of the child
	// to its SERVING and first binding.
	Timeout, Stall, StartTimeout time.Duration
	DataDir                      string // work directory of the child (etcd data, logs); "": temporary
	// MemoryBudget (bytes; 0: none) puts the child, and each restart, in
	// a memory cgroup of its own with this limit, as a container's would
	// be: the server's defaults size its heap to the limit it finds.
	MemoryBudget int64
	JSONPath     string // also write the results as scheduler_perf-style JSON
	Quiet        bool   // no progress lines
}

// Validate rejects what the flags must not say; Load calls it.
func (lc LoadConfig) Validate() error {
	switch {
	case lc.Nodes < 1 || lc.Pods < 1:
		return errors.New("--nodes and --pods must be positive")
	case lc.Batch < 1 || lc.Batch > 1000 || lc.Concurrency < 1:
		return errors.New("--batch must be 1-1000 (SubmitPods takes at most 1000) and --concurrency positive")
	case lc.PID < 0 || (lc.PID > 0 && lc.Addr == ""):
		return errors.New("--pid names the process of the server at --addr: it goes with --addr")
	case lc.Addr == "" && lc.Server.Path == "":
		return errors.New("no berth binary to start")
	case lc.Timeout <= 0 || lc.StartTimeout <= 0:
		return errors.New("--timeout and --start-timeout must be positive")
	case lc.RestartRounds < 0 || lc.RestartRounds > maxRestartRounds:
		return fmt.Errorf("--restart-rounds must be 1-%d", maxRestartRounds)
	case lc.MemoryBudget < 0 || (lc.MemoryBudget > 0 && lc.Addr != ""):
		return errors.New("--memory-budget must be positive, and places a server the run starts: not with --addr")
	}
	return nil
}

// maxRestartRounds bounds --restart-rounds: each round is two starts of
// the whole cluster, tens of seconds at the full size.
const maxRestartRounds = 20

// loadResult is the outcome of a berth load run.
type loadResult struct {
	run runResult
	// pid is the server measured (0: none); coldStart the first start's
	// time to SERVING (0 against --addr).
	pid       int
	coldStart time.Duration
	// loaded is the server's memory once every pod is bound; its HWM is
	// the peak of the whole load.
	loaded replica.ProcessMemory
	// stored is how many pods were acknowledged (the time to store counts
	// only when it is all of them); retried how many refusals were sent
	// again.
	stored, retried int
	restarts        []restartResult
	err             error
}

// restartResult is one restart on the same data, timed from the exec of
// the new process.
type restartResult struct {
	signal syscall.Signal
	// round is which of several rounds this restart was in, from 1; 0
	// when only one ran.
	round int
	pid   int // of the new process
	// stop is from the signal to the old process's exit.
	stop time.Duration
	// toServing is until the gRPC health service said SERVING; toBound
	// until a pod submitted as soon as the new process took calls was seen
	// bound on WatchBindings, at node.
	toServing, toBound time.Duration
	node               string
	// cpuToServing is the new process's CPU time until SERVING (zero if it
	// could not be read): its system share is the kernel's page work.
	cpuToServing cpuTimes
	// phases are the ends of its start-up phases, in order, from its
	// berth_startup_phase_seconds (none if its metrics could not be read).
	phases []startupPhase
	// mem is the new process's memory at that binding: the cost of
	// reloading the cluster.
	mem replica.ProcessMemory
	err error
}

// Load runs berth load: it starts the server (or targets Addr), loads the
// nodes and pods, measures memory, then the restarts, and prints progress,
// the results and a one-line summary to out.
func Load(ctx context.Context, lc LoadConfig, out io.Writer) error {
	if err := lc.Validate(); err != nil {
		return err
	}
	res := runLoad(ctx, lc, out)
	printLoadEnd(out, res)
	if lc.JSONPath != "" {
		if err := writeJSON(lc.JSONPath, loadPerfData(res)); err != nil {
			return errors.Join(res.err, fmt.Errorf("--json: %w", err))
		}
	}
	return res.err
}

// loader is one berth load run.
type loader struct {
	lc   LoadConfig
	out  io.Writer
	run  string
	addr string
	// metricsAddr is the child's metrics listener, for its start-up
	// phases; --serve-args may move it (see childMetricsAddr).
	metricsAddr string
	dataDir     string
	logDir      string
	starts      int
	// group holds each start of the child under --memory-budget; nil
	// without.
	group *cgroup.Group
	// stored and retried are the load's acknowledged pods and transient
	// refusals sent again.
	stored, retried int
}

// loadSubmitRetries bounds the resending of one batch's refused pods.
const loadSubmitRetries = 10

func runLoad(ctx context.Context, lc LoadConfig, out io.Writer) (res loadResult) {
	ctx, cancel := context.WithTimeout(ctx, lc.Timeout)
	defer cancel()
	l := &loader{lc: lc, out: out, run: fmt.Sprintf("load-%d", time.Now().UnixNano()%1e9), addr: lc.Addr}
	w, err := newWorkload(WorkloadBasic, l.run, Sizes{Nodes: lc.Nodes, Pods: lc.Pods}, Shape{}, nil)
	if err != nil {
		res.err = err
		return res
	}
	w.name = WorkloadScale
	res.run = runResult{workload: w.name, nodes: w.nodes, pods: w.pods}
	fmt.Fprintf(out, "%d nodes, %d pods\n", w.nodes, w.pods)

	var srv *serverProcess
	if lc.Addr == "" {
		cleanup, err := l.prepareDirs()
		if err != nil {
			res.err = err
			return res
		}
		defer cleanup()
		if lc.MemoryBudget > 0 {
			if err := l.makeGroup(); err != nil {
				res.err = err
				return res
			}
			defer l.removeGroup()
		}
		if srv, res.coldStart, err = l.startServing(ctx); err != nil {
			res.err = err
			return res
		}
		// srv changes with each restart: kill whichever is current.
		defer func() { srv.kill() }()
		res.pid = srv.pid()
		fmt.Fprintf(out, "started berth serve pid %d at %s (data %s, log %s): SERVING in %s\n",
			srv.pid(), l.addr, l.dataDir, l.logDir, res.coldStart.Round(time.Millisecond))
	} else {
		res.pid = lc.PID
		if res.pid == 0 {
			fmt.Fprintln(out, "note: no --pid: server memory is not reported")
		}
	}

	res.run, res.loaded, err = l.load(ctx, w, srv, res.pid)
	res.stored, res.retried = l.stored, l.retried
	printLoaded(out, res)
	if res.err = errors.Join(res.run.err, err); res.err != nil {
		l.explain(srv)
		return res
	}
	if !lc.Restarts || srv == nil {
		if lc.Restarts {
			fmt.Fprintln(out, "note: restarts need a server this run started (not --addr): skipped")
		}
		return res
	}
	res.restarts, srv, res.err = l.restarts(ctx, srv, w)
	return res
}

// restarts times a restart after SIGTERM, then one after SIGKILL, for
// each of the configured rounds, and returns the server then running.
func (l *loader) restarts(ctx context.Context, srv *serverProcess, w *workload) ([]restartResult, *serverProcess, error) {
	rounds := max(l.lc.RestartRounds, 1)
	var out []restartResult
	for round := 1; round <= rounds; round++ {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			var rr restartResult
			rr, srv = l.restart(ctx, srv, w, sig)
			if rounds > 1 {
				rr.round = round
			}
			out = append(out, rr)
			if rr.err != nil {
				l.explain(srv)
				return out, srv, fmt.Errorf("restart after %s: %w", signalName(sig), rr.err)
			}
			printRestart(l.out, rr)
		}
	}
	if rounds > 1 {
		printRestartSpread(l.out, out, rounds)
	}
	return out, srv, nil
}

// prepareDirs makes the child's data and log directories under
// --data-dir, or a temporary one the returned func removes.
func (l *loader) prepareDirs() (func(), error) {
	root, cleanup := l.lc.DataDir, func() {}
	if root == "" {
		tmp, err := os.MkdirTemp("", "berth-load-")
		if err != nil {
			return nil, err
		}
		root, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	l.dataDir, l.logDir = filepath.Join(root, "data"), filepath.Join(root, "logs")
	// Another run's cluster would be loaded at start and counted in the
	// memory: measure only on fresh data.
	if entries, err := os.ReadDir(l.dataDir); err == nil && len(entries) > 0 {
		cleanup()
		return nil, fmt.Errorf("%s already holds data: remove it or choose another --data-dir", l.dataDir)
	}
	if err := os.MkdirAll(l.logDir, 0o755); err != nil {
		cleanup()
		return nil, err
	}
	addr, err := reservePort()
	if err != nil {
		cleanup()
		return nil, err
	}
	l.addr = addr
	if l.metricsAddr, err = reservePort(); err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// spawn execs berth serve on the run's address and data; each start logs
// to a file of its own.
func (l *loader) spawn(ctx context.Context) (*serverProcess, error) {
	l.starts++
	args := []string{"serve", "--listen", l.addr, "--metrics-listen", l.metricsAddr, "--data-dir", l.dataDir,
		"--replica-id", "berth-load", "--log-level", "warn"}
	args = append(args, l.lc.ServeArgs...)
	sc := l.lc.Server
	if l.group != nil {
		sc = sc.joining(l.group.Procs())
	}
	return startServerProcess(ctx, sc, args, filepath.Join(l.logDir, fmt.Sprintf("serve-%d.log", l.starts)))
}

// startServing spawns the child and waits until it says SERVING.
func (l *loader) startServing(ctx context.Context) (*serverProcess, time.Duration, error) {
	srv, err := l.spawn(ctx)
	if err != nil {
		return nil, 0, err
	}
	sctx, stop := l.whileAlive(ctx, srv, l.lc.StartTimeout)
	defer stop()
	conn, err := dialRestarting(l.addr)
	if err != nil {
		srv.kill()
		return nil, 0, err
	}
	defer conn.Close()
	servingAt, err := waitServing(sctx, conn)
	if err != nil {
		err = fmt.Errorf("berth serve not SERVING: %w", contextCause(sctx, err))
		l.explain(srv)
		srv.kill()
		return nil, 0, err
	}
	return srv, servingAt.Sub(srv.started), nil
}

// whileAlive bounds ctx by limit (0: none) and by the child's life, so a
// server that dies ends the waits on it with a cause that says so.
func (l *loader) whileAlive(ctx context.Context, srv *serverProcess, limit time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stopTimer := func() {}
	if limit > 0 {
		var cancelTimer context.CancelFunc
		ctx, cancelTimer = context.WithTimeoutCause(ctx, limit, fmt.Errorf("not done within %s", limit))
		stopTimer = cancelTimer
	}
	if srv == nil {
		return ctx, func() { stopTimer(); cancel(nil) }
	}
	done := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case <-srv.done():
			cancel(fmt.Errorf("berth serve (pid %d) exited: %v%s", srv.pid(), srv.waitErr, l.oomNote()))
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		<-watching
		stopTimer()
		cancel(nil)
	}
}

// load registers the nodes and loads the pods through the bench's runner,
// then reads the server's memory.
func (l *loader) load(ctx context.Context, w *workload, srv *serverProcess, pid int) (runResult, replica.ProcessMemory, error) {
	lctx, stop := l.whileAlive(ctx, srv, 0)
	defer stop()
	conn, err := grpc.NewClient(l.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return runResult{workload: w.name, nodes: w.nodes, pods: w.pods}, replica.ProcessMemory{}, err
	}
	defer conn.Close()
	bc := Config{
		Addr: l.lc.Addr, Workload: w.name, Batch: l.lc.Batch, Concurrency: l.lc.Concurrency,
		Timeout: l.lc.Timeout, Stall: l.lc.Stall, Quiet: l.lc.Quiet, TraceWindow: 1, Replicas: 1,
	}
	r := newRunner(bc, w, l.run, conn, l.out)
	r.t.slim = true
	// A million pods meet the odd overloaded moment: send a refused pod
	// again, as an orchestrator would, and count it, rather than lose the
	// run. The bench keeps failing on a refusal.
	r.submitRetries = loadSubmitRetries
	r.progressEvery = l.lc.Progress
	var mem memTracker
	if pid > 0 {
		r.serverCPU = func() (time.Duration, error) { return readCPU(pid) }
		r.progressExtra = func() string {
			m := mem.read(pid)
			return fmt.Sprintf("server rss %s (peak %s)", formatBytes(m.Resident), formatBytes(m.Peak))
		}
	}
	res := r.measureWorkload(lctx)
	if res.err != nil {
		res.err = contextCause(lctx, res.err)
	}
	l.stored = r.t.ackedCount(phaseMeasured)
	l.retried = r.t.counts().retried
	var m replica.ProcessMemory
	if pid > 0 {
		if m, err = replica.ReadProcessMemory(pid); err != nil {
			err = fmt.Errorf("server memory: %w", err)
		}
	}
	if l.lc.Addr != "" {
		// After the reading: deleting the pods is not part of the load.
		r.cleanupShared(ctx, max(time.Minute, l.lc.StartTimeout))
	}
	return res, m, err
}

// restart stops old with sig, starts a new child on the same data, and
// times it to SERVING and to the binding of a pod submitted as soon as it
// takes calls. It returns the child now running (old's on failure to start
// a new one: it is gone either way, and kill is safe on it).
func (l *loader) restart(ctx context.Context, old *serverProcess, w *workload, sig syscall.Signal) (restartResult, *serverProcess) {
	rr := restartResult{signal: sig}
	if rr.stop, rr.err = old.stop(sig, l.lc.StartTimeout); rr.err != nil {
		return rr, old
	}
	srv, err := l.spawn(ctx)
	if err != nil {
		rr.err = err
		return rr, old
	}
	rr.pid = srv.pid()
	rctx, stop := l.whileAlive(ctx, srv, l.lc.StartTimeout)
	defer stop()
	conn, err := dialRestarting(l.addr)
	if err != nil {
		rr.err = err
		return rr, srv
	}
	defer conn.Close()
	pod := w.pod(0)
	pod.Name = fmt.Sprintf("%s-after-%s", l.run, strings.ToLower(signalName(sig)))
	var servingAt, boundAt time.Time
	g, gctx := errgroup.WithContext(rctx)
	g.Go(func() (err error) {
		if servingAt, err = waitServing(gctx, conn); err == nil {
			rr.cpuToServing, _ = readCPUTimes(srv.pid())
		}
		return err
	})
	g.Go(func() (err error) {
		boundAt, rr.node, err = submitAndWaitBound(gctx, conn, pod)
		return err
	})
	if err := g.Wait(); err != nil {
		rr.err = contextCause(rctx, err)
		return rr, srv
	}
	rr.toServing, rr.toBound = servingAt.Sub(srv.started), boundAt.Sub(srv.started)
	if rr.mem, err = replica.ReadProcessMemory(srv.pid()); err != nil {
		rr.err = fmt.Errorf("server memory: %w", err)
	}
	// Read once the binding is in: a scrape costs the child CPU, and the
	// phases it reports no longer move after SERVING.
	rr.phases = readStartupPhases(rctx, childMetricsAddr(l.metricsAddr, l.lc.ServeArgs))
	return rr, srv
}

// explain prints the end of the child's log after a failure.
func (l *loader) explain(srv *serverProcess) {
	if srv == nil {
		return
	}
	if tail := srv.logTail(20); tail != "" {
		fmt.Fprintf(l.out, "berth serve (pid %d) log, last lines (%s):\n%s\n", srv.pid(), srv.logPath, tail)
	}
}

// dialRestarting is a connection to a server that is (re)starting: it
// retries connecting every few milliseconds rather than with gRPC's
// default backoff of a second and more, which would be measured as
// start-up time.
func dialRestarting(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.2, Jitter: 0.1, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
}

// retryTick is how often a call refused while the server starts is tried
// again.
const retryTick = 10 * time.Millisecond

// startingUp says whether err is what a starting server answers before it
// can: no listener yet, or a service that is not ready.
func startingUp(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// retryStarting calls f until it returns something other than startingUp,
// or ctx ends.
func retryStarting(ctx context.Context, f func() error) error {
	t := time.NewTicker(retryTick)
	defer t.Stop()
	for {
		err := f()
		if !startingUp(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// waitServing follows the health service's status of the whole server
// until it is SERVING and returns when it saw that.
func waitServing(ctx context.Context, conn grpc.ClientConnInterface) (time.Time, error) {
	health := healthpb.NewHealthClient(conn)
	var at time.Time
	err := retryStarting(ctx, func() error {
		stream, err := health.Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err != nil {
			return err
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				return err
			}
			if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				at = time.Now()
				return nil
			}
		}
	})
	return at, err
}

// submitAndWaitBound submits pod as soon as the server takes it and
// returns when its BOUND event arrived, and the node.
func submitAndWaitBound(ctx context.Context, conn grpc.ClientConnInterface, pod *berthv1.Pod) (time.Time, string, error) {
	pods, sched := berthv1.NewPodServiceClient(conn), berthv1.NewSchedulerServiceClient(conn)
	var rev int64
	err := retryStarting(ctx, func() error {
		resp, err := pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: pod}, grpc.WaitForReady(true))
		rev = resp.GetRevision()
		return err
	})
	if err != nil {
		return time.Time{}, "", fmt.Errorf("submit %s: %w", pod.GetName(), err)
	}
	var at time.Time
	var node string
	err = retryStarting(ctx, func() error {
		stream, err := sched.WatchBindings(ctx, &berthv1.WatchBindingsRequest{FromRevision: rev}, grpc.WaitForReady(true))
		if err != nil {
			return err
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				return err
			}
			ev := resp.GetEvent()
			if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND &&
				ev.GetNamespace() == pod.GetNamespace() && ev.GetName() == pod.GetName() {
				at, node = time.Now(), ev.GetNodeName()
				return nil
			}
		}
	})
	if err != nil {
		return time.Time{}, "", fmt.Errorf("wait for %s to bind: %w", pod.GetName(), err)
	}
	return at, node, nil
}

// contextCause adds why ctx ended, when it did, to err.
func contextCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

// formatBytes is a size in MiB, or GiB from 10 GiB, for reading at a glance.
func formatBytes(b int64) string {
	if b >= 10<<30 {
		return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 0, 64) + " MiB"
}
