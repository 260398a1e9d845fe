package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-io/berth/replica"
)

// ServerCommand is how berth load runs `berth serve` as a child process:
// Path with Args before "serve" (none for the berth binary itself) and Env
// added to this process's environment (a test binary standing in for
// berth needs a variable that makes it act as berth).
type ServerCommand struct {
	Path string
	Args []string
	Env  []string
}

// joining runs sc through a shell that first moves itself into the cgroup
// whose membership file is procs, then execs sc in its own place: the
// server is in the group before it runs (so it finds the group's limit),
// and keeps the pid the run measures.
func (sc ServerCommand) joining(procs string) ServerCommand {
	return ServerCommand{
		Path: "/bin/sh",
		Args: append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs, sc.Path}, sc.Args...),
		Env:  sc.Env,
	}
}

// serverProcess is one `berth serve` child in a process group of its own.
// Whatever ends the run (its context, a failed step, a panic unwinding
// through a deferred kill, this process dying) ends the child and anything
// it started: a memory figure must never come from a leftover server, and
// a test must never leave one behind.
type serverProcess struct {
	cmd     *exec.Cmd
	started time.Time // just before the exec
	logPath string
	exited  chan struct{} // closed once the child is reaped
	waitErr error         // valid once exited is closed
}

// startServerProcess execs the child and returns once it runs; it does not
// wait for it to serve. ctx bounds the child's whole life: cancelling it
// kills the group.
func startServerProcess(ctx context.Context, sc ServerCommand, args []string, logPath string) (*serverProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, sc.Path, append(append([]string(nil), sc.Args...), args...)...)
	cmd.Env = append(os.Environ(), sc.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid, syscall.SIGKILL) }
	// A child that ignored the kill would be waited for forever; the group
	// is SIGKILLed, so this only guards against a stuck reaper.
	cmd.WaitDelay = 10 * time.Second
	p := &serverProcess{cmd: cmd, logPath: logPath, exited: make(chan struct{})}

	// The child is started and reaped on one locked OS thread: Linux sends
	// the parent-death signal when the thread that forked the child exits,
	// not the process, and a locked thread lives exactly as long as this
	// goroutine, which lives as long as the child.
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer logFile.Close()
		p.started = time.Now()
		if err := cmd.Start(); err != nil {
			startErr <- err
			runtime.UnlockOSThread()
			return
		}
		startErr <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
		// Returning still locked retires the thread, child and all.
	}()
	if err := <-startErr; err != nil {
		return nil, fmt.Errorf("start %s: %w", sc.Path, err)
	}
	return p, nil
}

func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// stop sends sig to the child's whole group and returns how long it took
// the child to exit, giving up (and killing the group) after grace.
func (p *serverProcess) stop(sig syscall.Signal, grace time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := killGroup(p.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return 0, err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return time.Since(start), nil
	case <-t.C:
		p.kill()
		return time.Since(start), fmt.Errorf("berth serve (pid %d) still running %s after %s: killed", p.pid(), grace, sig)
	}
}

// kill ends the group at once and waits until the child is reaped; it is
// safe to call on a child already gone, and more than once.
func (p *serverProcess) kill() {
	_ = killGroup(p.pid(), syscall.SIGKILL)
	<-p.exited
}

// done is closed once the child has exited.
func (p *serverProcess) done() <-chan struct{} { return p.exited }

// logTail is the end of the child's log, for a failure to show why.
func (p *serverProcess) logTail(lines int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	tail := all[max(0, len(all)-lines):]
	for i, line := range tail {
		// etcd's slow-request warnings quote whole transactions.
		if len(line) > maxLogLine {
			tail[i] = line[:maxLogLine] + "..."
		}
	}
	return strings.Join(tail, "\n")
}

const maxLogLine = 400

// killGroup signals the process group led by pid.
func killGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}

// processAlive says whether pid still exists (a zombie not yet reaped
// counts as alive: it is still in the process table).
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// userHZ is the unit of a process's CPU times in /proc/PID/stat: Linux
// reports them in USER_HZ, 100 per second, whatever the kernel's own tick.
const userHZ = 100

// cpuTimes is a process's CPU time in user and in kernel (system) mode.
// System time that grows with the memory a process touches is the kernel
// providing fresh pages, which on some VMs costs a trip to the host.
type cpuTimes struct{ user, system time.Duration }

func (c cpuTimes) total() time.Duration { return c.user + c.system }

// readCPU reads the CPU time (user and system) a process has used.
func readCPU(pid int) (time.Duration, error) {
	c, err := readCPUTimes(pid)
	return c.total(), err
}

// readCPUTimes reads a process's user and system CPU time.
func readCPUTimes(pid int) (cpuTimes, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPU(b)
}

// parseCPU takes utime and stime (fields 14 and 15) from a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces
// or parentheses itself, so the fields are counted from its last ")".
func parseCPU(b []byte) (cpuTimes, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return cpuTimes{}, errors.New("no command name in the process stat")
	}
	fields := strings.Fields(string(b[end+1:]))
	// fields[0] is field 3 (state): utime and stime are fields[11] and [12].
	if len(fields) < 13 {
		return cpuTimes{}, fmt.Errorf("process stat has %d fields after the command name, want at least 13", len(fields))
	}
	var ticks [2]int64
	for i, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return cpuTimes{}, fmt.Errorf("process stat: CPU time %q", f)
		}
		ticks[i] = n
	}
	const tick = time.Second / userHZ
	return cpuTimes{user: time.Duration(ticks[0]) * tick, system: time.Duration(ticks[1]) * tick}, nil
}

// reservePort picks a free loopback port for the child. The port is free
// again before the child binds it; a restart reuses it, so the replica's
// address (and default identity) stay what they were, as for an operator
// restarting a replica in place.
func reservePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// memTracker remembers the last good reading of one child's memory, so a
// progress line or the report can still show it after the child is gone.
type memTracker struct {
	mu   sync.Mutex
	last replica.ProcessMemory
}

func (m *memTracker) read(pid int) replica.ProcessMemory {
	st, err := replica.ReadProcessMemory(pid)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.last = st
	}
	return m.last
}
