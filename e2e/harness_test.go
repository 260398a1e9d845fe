// Package e2e drives real berth processes over loopback gRPC, each with a
// real etcd, the way an orchestrator would.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

var berthBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	berthBin = filepath.Join(dir, "berth")
	build := exec.Command("go", "build", "-o", berthBin, "github.com/berth-io/berth/cmd/berth")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berth:", err)
		os.Exit(1)
	}
	// The berth processes are children; goleak checks what the tests
	// themselves start in this process (clients, proxies, the in-process
	// etcd of some tests).
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// freeAddr reserves a loopback port. The tiny window before the child binds
// it is acceptable in tests; the alternative (port 0) hides the address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// reserveAddr holds a loopback port until release is called, just before
// a child binds it. A port freeAddr returns is free again at once, and
// while several children are set up, another listener of this process (a
// proxy, the next reservation) may be handed it first.
func reserveAddr(t *testing.T) (addr string, release func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release = sync.OnceFunc(func() { l.Close() })
	t.Cleanup(release)
	return l.Addr().String(), release
}

// proc is a berth serve child process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	mu   sync.Mutex
	log  strings.Builder
}

func startBerth(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	p := &proc{t: t, addr: freeAddr(t), done: make(chan struct{})}
	args := append([]string{"serve", "--listen", p.addr, "--metrics-listen", "-", "--data-dir", dataDir, "--log-level", "warn"}, extra...)
	p.cmd = exec.Command(berthBin, args...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("berth %s log:\n%s", p.addr, p.logs())
		}
	})
	p.waitHealthy()
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) waitHealthy() {
	p.t.Helper()
	conn := dial(p.t, p.addr)
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		select {
		case <-p.done:
			p.t.Fatalf("berth exited before serving:\n%s", p.logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("berth not healthy after 60s: %v\n%s", err, p.logs())
		}
	}
}

// kill9 is a crash: no shutdown path runs.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop is a graceful shutdown; it must finish cleanly.
func (p *proc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("berth did not stop within 30s of SIGTERM:\n%s", p.logs())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("berth exited with %d after SIGTERM:\n%s", code, p.logs())
	}
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.kill9()
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type clients struct {
	cluster berthv1.ClusterServiceClient
	pods    berthv1.PodServiceClient
	sched   berthv1.SchedulerServiceClient
}

func newClients(t *testing.T, addr string) clients {
	conn := dial(t, addr)
	return clients{berthv1.NewClusterServiceClient(conn), berthv1.NewPodServiceClient(conn), berthv1.NewSchedulerServiceClient(conn)}
}

func testPod(name string, cpu int64) *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: "e2e", Name: name,
		Containers: []*berthv1.Container{{Name: "main", Image: "app:1", Requests: map[string]int64{"cpu": cpu, "memory": 64 << 20}}},
	}
}

func testNode(name string, cpu int64) *berthv1.Node {
	return &berthv1.Node{Name: name, Allocatable: map[string]int64{"cpu": cpu, "memory": 64 << 30, "pods": 110}}
}

// bindings collects WatchBindings events until stopped.
type bindings struct {
	mu     sync.Mutex
	events []*berthv1.BindingEvent
	err    error
	notify chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func watch(t *testing.T, c clients, from int64) *bindings {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bindings{notify: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	stream, err := c.sched.WatchBindings(ctx, &berthv1.WatchBindingsRequest{FromRevision: from})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(b.done)
		for {
			resp, err := stream.Recv()
			b.mu.Lock()
			if err != nil {
				if err != io.EOF {
					b.err = err
				}
				b.mu.Unlock()
				return
			}
			if resp.GetEvent() == nil {
				b.mu.Unlock()
				continue // a progress marker
			}
			b.events = append(b.events, resp.GetEvent())
			b.mu.Unlock()
			select {
			case b.notify <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-b.done })
	return b
}

// waitFor polls cond on every event until it holds or the deadline passes.
func (b *bindings) waitFor(t *testing.T, d time.Duration, what string, cond func([]*berthv1.BindingEvent) bool) []*berthv1.BindingEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		b.mu.Lock()
		evs := append([]*berthv1.BindingEvent(nil), b.events...)
		err := b.err
		b.mu.Unlock()
		if cond(evs) {
			return evs
		}
		if err != nil {
			t.Fatalf("watch ended while waiting for %s: %v", what, err)
		}
		select {
		case <-b.notify:
		case <-deadline:
			t.Fatalf("timed out waiting for %s (%d events seen)", what, len(evs))
		}
	}
}

func boundCount(evs []*berthv1.BindingEvent) map[string]int {
	n := map[string]int{}
	for _, ev := range evs {
		if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
			n[ev.GetNamespace()+"/"+ev.GetName()]++
		}
	}
	return n
}

// pollUntil retries fn until it returns nil or d passes.
func pollUntil(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, d, err)
		}
		<-tick.C
	}
}
