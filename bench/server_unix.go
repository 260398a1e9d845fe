//go:build unix && !linux

package bench

import "syscall"

// childProcAttr puts the child in a group of its own, so one signal reaches
// it and whatever it starts. Without Linux's parent-death signal, only the
// deferred kills and the run's context end it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
