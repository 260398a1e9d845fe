package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent lets the heap grow to four times what is live before the
// collector runs, instead of Go's two. Most of a scheduler's heap is its
// cache and the embedded etcd, which live as long as the process; at the
// default the collector spent about a tenth of a preemption benchmark's
// CPU marking them again, and throughput rose by a fifth at 300, for
// twice the resident memory (400 MB to 800 MB at 5,000 nodes).
const defaultGCPercent = 300

const gcPercentUsage = "garbage collection target percentage (Go's GOGC); the GOGC environment variable, if set, wins. " +
	"GOMEMLIMIT, if set, bounds the heap as usual"

// setGCPercent applies percent unless the operator set GOGC.
func setGCPercent(percent int) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(percent)
}
