package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTestChild starts the test binary as a stand-in child in mode (see
// testChildEnv), with a kill at the test's end whatever happens.
func startTestChild(t *testing.T, ctx context.Context, mode string) *serverProcess {
	t.Helper()
	p, err := startServerProcess(ctx, ServerCommand{Path: os.Args[0], Env: []string{testChildEnv + "=" + mode}}, nil,
		filepath.Join(t.TempDir(), "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

// pollUntil checks cond every few milliseconds until it holds, failing
// the test after 30s. What it waits for has no event to wait on: a
// grandchild killed with its group is reaped by init, not by us.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("still waiting for %s after 30s", what)
		}
	}
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("%s (pid %d) to end", what, pid), func() bool { return !processAlive(pid) })
}

// readPID waits until the child has written a pid to its log.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var line []byte
	pollUntil(t, "the child to write a pid", func() bool {
		b, _ := os.ReadFile(path)
		var ok bool
		line, ok = bytes.CutSuffix(b, []byte("\n"))
		return ok
	})
	pid, err := strconv.Atoi(string(line))
	if err != nil {
		t.Fatalf("child wrote %q, want a pid", line)
	}
	return pid
}

// Cancelling the run's context kills the child and what it started.
func TestServerProcessKilledWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startTestChild(t, ctx, "group")
	grandchild := readPID(t, p.logPath)
	cancel()
	<-p.done()
	if !killedBy(p.waitErr, syscall.SIGKILL) {
		t.Errorf("child ended with %v, want killed by SIGKILL", p.waitErr)
	}
	waitGone(t, "child", p.pid())
	waitGone(t, "grandchild", grandchild)
}

// A panic unwinding through the run's deferred kill ends the child.
func TestServerProcessKilledOnPanic(t *testing.T) {
	var p *serverProcess
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic")
			}
		}()
		p = startTestChild(t, context.Background(), "sleep")
		defer p.kill()
		panic("run failed")
	}()
	if !killedBy(p.waitErr, syscall.SIGKILL) {
		t.Errorf("child ended with %v, want killed by SIGKILL", p.waitErr)
	}
	waitGone(t, "child", p.pid())
}

// A bench process that dies without killing its child (a crash, kill -9)
// takes the child with it: the kernel's parent-death signal.
func TestServerProcessDiesWithBench(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testChildEnv+"=parent")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("parent: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("parent wrote %q, want its child's pid", out)
	}
	waitGone(t, "orphaned child", pid)
}

// stop sends the signal to the group and waits for the exit.
func TestServerProcessStop(t *testing.T) {
	p := startTestChild(t, context.Background(), "sleep")
	if _, err := p.stop(syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if processAlive(p.pid()) {
		t.Errorf("pid %d alive after stop", p.pid())
	}
	if !killedBy(p.waitErr, syscall.SIGTERM) {
		t.Errorf("child ended with %v, want killed by SIGTERM", p.waitErr)
	}
}

// killedBy says whether a child's Wait error is its death by sig (and so
// that it was still running when sig came).
func killedBy(err error, sig syscall.Signal) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// A child that ignores the signal is killed after the grace period, and
// stop says so.
func TestServerProcessStopKillsStubbornChild(t *testing.T) {
	p := startTestChild(t, context.Background(), "stubborn")
	readPID(t, p.logPath) // SIGTERM is ignored from here on
	if _, err := p.stop(syscall.SIGTERM, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("stop: %v; want an error saying the child was killed", err)
	}
	if processAlive(p.pid()) {
		t.Errorf("pid %d alive after stop", p.pid())
	}
}

// A child joining a cgroup writes its own pid to the group's membership
// file before it runs, and is then the process the run measures: the shell
// that joined gave it its pid.
func TestServerProcessJoinsGroupFirst(t *testing.T) {
	procs := filepath.Join(t.TempDir(), "cgroup.procs")
	logPath := filepath.Join(t.TempDir(), "child.log")
	sc := ServerCommand{Path: os.Args[0], Env: []string{testChildEnv + "=pid"}}.joining(procs)
	p, err := startServerProcess(context.Background(), sc, nil, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	if got := readPID(t, logPath); got != p.pid() {
		t.Errorf("the child runs as pid %d; want the started pid %d", got, p.pid())
	}
	b, err := os.ReadFile(procs)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(p.pid()) {
		t.Errorf("membership file holds %q, %v; want the child's pid %d", b, err, p.pid())
	}
}

// The CPU times are counted from the command name's last ")", which may
// hold spaces and parentheses of its own.
func TestParseCPU(t *testing.T) {
	stat := "4242 (odd (name) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 123 456 789\n"
	got, err := parseCPU([]byte(stat))
	if want := (cpuTimes{user: 2500 * time.Millisecond, system: 750 * time.Millisecond}); err != nil || got != want || got.total() != 3250*time.Millisecond {
		t.Errorf("parseCPU = %+v, %v; want %+v (250 user and 75 system ticks)", got, err, want)
	}
	for _, bad := range []string{"4242 odd S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 -5 75 0"} {
		if _, err := parseCPU([]byte(bad)); err == nil {
			t.Errorf("parseCPU(%q) succeeded", bad)
		}
	}
	// This process's own: it grows as it works.
	deadline := time.Now().Add(10 * time.Second)
	for sum := 0; ; sum++ {
		cpu, err := readCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if cpu > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("own CPU still %v after 10s of work (%d)", cpu, sum)
		}
	}
}
