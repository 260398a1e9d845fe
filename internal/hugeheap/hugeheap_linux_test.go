//go:build linux

package hugeheap

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// After Advise, the memory the heap grows into is advised (VmFlags
// "hg"), and mapping it ahead made none of it resident.
func TestAdviseHeapAdvisesWhatTheHeapGrowsInto(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("no transparent huge pages in this kernel")
	}
	const size = 512 << 20
	rssBefore := vmRSS(t)
	advised, err := Advise(size)
	if err != nil {
		t.Fatal(err)
	}
	if advised < size {
		t.Fatalf("advised %d bytes, want at least the %d mapped ahead", advised, size)
	}
	if grew := vmRSS(t) - rssBefore; grew > size/4 {
		t.Fatalf("resident memory grew by %d bytes: the heap mapped ahead was touched", grew)
	}
	// A large allocation is carved from the free heap mapped ahead.
	b := make([]byte, 128<<20)
	for i := range b {
		b[i] = 1
	}
	addr := uintptr(unsafe.Pointer(&b[0]))
	if !advisedAt(t, addr) || !advisedAt(t, addr+uintptr(len(b))-1) {
		t.Fatalf("a new 128 MiB allocation at %#x is not in advised memory", addr)
	}
}

// advisedAt reports whether the mapping holding addr is MADV_HUGEPAGE.
func advisedAt(t *testing.T, addr uintptr) bool {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		// A mapping's first line starts with its range; the lines of its
		// fields ("Rss:", "VmFlags:") with a name.
		if start, end, ok := parseMapsRange(strings.Fields(line)[0]); ok {
			in = uint64(addr) >= start && uint64(addr) < end
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line+" ", " hg ")
		}
	}
	return false
}

func vmRSS(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
