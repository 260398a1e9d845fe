// Package hugeheap maps the Go heap ahead and asks Linux to back it with
// transparent huge pages.
//
// Go maps its heap without asking for transparent huge pages, so under the
// common "madvise" mode the kernel faults it in 4 KiB at a time. On a VM
// each fault is costly, and a replica's heap is large and long-lived:
// restarting one of 200,000 pods spent a fifth of its CPU faulting. So at
// start berth serve has the runtime map the heap it may grow into, marks
// that memory MADV_HUGEPAGE (as a JVM's UseTransparentHugePages does for
// its heap) and gives it back untouched: it stays mapped and advised, and
// the heap later grows into huge pages as under THP's "always" mode. The
// core's benchmarks do the same, so that they pay for memory what a
// replica pays.
package hugeheap

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// ModePath is where Linux says whether anonymous memory gets transparent
// huge pages: always, only where advised (madvise), or never.
const ModePath = "/sys/kernel/mm/transparent_hugepage/enabled"

// Mode reads the selected mode from path, whose content looks like
// "always [madvise] never"; "unknown" if it cannot.
func Mode(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	_, rest, ok := strings.Cut(string(b), "[")
	mode, _, closed := strings.Cut(rest, "]")
	if !ok || !closed || mode == "" {
		return "unknown"
	}
	return mode
}

// hugePageSize is what one transparent huge page covers; only whole,
// aligned units of a mapping can be backed by one.
const hugePageSize = 2 << 20

// premapChunk is the size of each allocation that maps the heap ahead:
// the runtime maps memory for it in pieces this size or smaller, none
// large enough for the kernel's overcommit heuristic to refuse.
const premapChunk = 64 << 20

// maxHeapAdvice bounds the heap mapped ahead. Only address space: nothing
// of it is resident until the heap grows into it.
const maxHeapAdvice = 8 << 30

// Size is how much heap to map ahead: the memory limit if there
// is one (math.MaxInt64 if not), else half the machine's memory; at most
// maxHeapAdvice, in whole chunks.
func Size(memoryLimit int64, memTotal uint64) int64 {
	size := int64(maxHeapAdvice)
	if memTotal > 0 && memTotal/2 < uint64(size) {
		size = int64(memTotal / 2)
	}
	if memoryLimit < math.MaxInt64 {
		size = min(size, memoryLimit)
	}
	return size / premapChunk * premapChunk
}

// mapping is a range of the process's address space, [start, end).
type mapping struct{ start, end uintptr }

// hugePageCandidates returns the private anonymous writable mappings in a
// /proc/<pid>/maps listing, trimmed to whole huge pages: the Go heap and
// the runtime's own structures. Named mappings ([stack], files, etcd's
// database) and reservations without access are left alone.
func hugePageCandidates(maps []byte) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		f := bytes.Fields(sc.Bytes())
		if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		start, end, ok := parseMapsRange(string(f[0]))
		if !ok {
			continue
		}
		m := mapping{start: uintptr((start + hugePageSize - 1) &^ (hugePageSize - 1)), end: uintptr(end &^ (hugePageSize - 1))}
		if m.start < m.end {
			out = append(out, m)
		}
	}
	return out
}

// parseMapsRange reads the "start-end" field of a /proc/<pid>/maps line,
// two hexadecimal addresses.
func parseMapsRange(field string) (start, end uint64, ok bool) {
	lo, hi, ok := strings.Cut(field, "-")
	if !ok {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	return start, end, err1 == nil && err2 == nil
}

// adviseHeap has the runtime map size bytes of heap, in chunks it takes
// fresh from the OS and so never writes, advises every candidate mapping
// in maps() through advise, then drops the chunks and has their pages
// returned to the OS: still mapped and advised, not resident. It returns
// the bytes advised.
func adviseHeap(size int64, maps func() ([]byte, error), advise func(mapping) error) (int64, error) {
	// The chunks are never resident: no collection should run for them.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	chunks := make([][]byte, 0, size/premapChunk)
	for range size / premapChunk {
		chunks = append(chunks, make([]byte, premapChunk))
	}
	var advised int64
	b, err := maps()
	if err == nil {
		for _, m := range hugePageCandidates(b) {
			if err = advise(m); err != nil {
				break
			}
			advised += int64(m.end - m.start)
		}
	}
	runtime.KeepAlive(chunks)
	chunks = nil
	debug.FreeOSMemory()
	return advised, err
}
