package scheduler

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/berth-io/berth/internal/hugeheap"
)

// benchHeapAdvice is the heap mapped ahead for benchmarks: more than the
// loops at 5,000 nodes grow into.
const benchHeapAdvice = 1 << 30

// TestMain backs the heap with huge pages when benchmarks run, as berth
// serve does at start: without it BenchmarkLoops spent a tenth of its CPU
// faulting in fresh heap 4 KiB at a time, which a replica does not.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" && hugeheap.Mode(hugeheap.ModePath) == "madvise" {
		if _, err := hugeheap.Advise(benchHeapAdvice); err != nil {
			fmt.Fprintln(os.Stderr, "transparent huge pages: advising the heap failed:", err)
		}
	}
	os.Exit(m.Run())
}
