package bench

import "syscall"

// childProcAttr puts the child in a group of its own, so one signal reaches
// it and whatever it starts, and has the kernel kill it if the thread that
// started it (locked for the child's life: see startServerProcess) dies
// with this process.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
