//go:build linux

package hugeheap

import (
	"errors"
	"os"
	"syscall"
)

// Advise maps size bytes of heap ahead (in whole chunks of 64 MiB) and
// advises the process's anonymous memory MADV_HUGEPAGE. It returns the
// bytes advised. It does not check the kernel's mode: the caller decides.
func Advise(size int64) (int64, error) {
	return adviseHeap(size, func() ([]byte, error) { return os.ReadFile("/proc/self/maps") }, madviseHugePages)
}

func madviseHugePages(m mapping) error {
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_HUGEPAGE)
	switch {
	case errno == 0:
		return nil
	case errors.Is(errno, syscall.ENOMEM):
		// Unmapped since the map was read (a thread's stack, say).
		return nil
	default:
		return errno
	}
}
