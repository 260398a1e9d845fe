//go:build linux

package main

import (
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/internal/hugeheap"
)

// adviseHugePages maps the heap ahead and advises it (see hugeheap)
// when on, the kernel's mode is madvise (under always the advice changes
// nothing, under never the kernel ignores it), GODEBUG=disablethp=1 does
// not ask the runtime for the opposite, and overcommit is not strict,
// where the address space mapped ahead would count against the commit
// limit. It reports whether it advised any.
func adviseHugePages(on bool, mode string, logger *zap.Logger) bool {
	if !on || mode != "madvise" || strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return false
	}
	if b, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err == nil && strings.TrimSpace(string(b)) == "2" {
		logger.Info("transparent huge pages: not mapping the heap ahead under strict overcommit (vm.overcommit_memory=2)")
		return false
	}
	var memTotal uint64
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		memTotal = si.Totalram * uint64(si.Unit)
	}
	size := hugeheap.Size(debug.SetMemoryLimit(-1), memTotal)
	began := time.Now()
	advised, err := hugeheap.Advise(size)
	if err != nil {
		logger.Warn("transparent huge pages: advising the heap failed", zap.Error(err))
	}
	logger.Info("transparent huge pages: heap mapped ahead and advised", zap.Int64("mapped_ahead_bytes", size),
		zap.Int64("advised_bytes", advised), zap.Duration("took", time.Since(began)))
	return advised > 0
}
