package bench

import "time"

// runResult is the outcome of one workload.
type runResult struct {
	workload              string
	nodes, initPods, pods int
	bound                 int // measured pods bound
	unschedulable         int // measured pods never bound (trace) or found unschedulable (on failure)
	evicts, deletes       int
	evictErrors           int
	initDur               time.Duration
	submitDur             time.Duration   // measured pods' SubmitPods calls
	replayDur             time.Duration   // trace: all creations and deletions
	elapsed               time.Duration   // first measured submit to last measured bind
	latencies             []time.Duration // submit to bound, sorted: under --rate from each pod's due time
	rate                  float64         // --rate: offered pods/s (0: as fast as acknowledged)
	violations            []string
	err                   error
	skipped               string        // why the workload did not run, if it did not
	replicas              []replicaStat // with --replicas > 1: each replica's share
	// Under --rate: callLatencies is submit to bound from each pod's call
	// start (sorted), the server's share; sentRate is the rate the calls
	// achieved, over the pods sent; sendLag is how late the last pod's
	// call started.
	callLatencies []time.Duration
	sentRate      float64
	sendLag       time.Duration
	// serverCPU is the server's CPU time (user and system) over the
	// measured phase; 0 when not read.
	serverCPU time.Duration
	// Under --rate, callLatencies split at each pod's acknowledgement
	// (podRecord.ackSplit), sorted each; and floorLatencies, a trivial
	// call's latency sampled meanwhile (floorProbe), sorted.
	ackLatencies, afterAckLatencies []time.Duration
	floorLatencies                  []time.Duration
}

func (r runResult) podsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.bound) / r.elapsed.Seconds()
}

// cpuPerThousand is the server's CPU milliseconds per 1,000 measured pods
// bound; 0 when the CPU was not read.
func (r runResult) cpuPerThousand() float64 {
	if r.serverCPU <= 0 || r.bound <= 0 {
		return 0
	}
	return float64(r.serverCPU.Milliseconds()) * 1000 / float64(r.bound)
}

// submitPerSec is the rate of durable acknowledgements.
func (r runResult) submitPerSec() float64 {
	if r.submitDur <= 0 {
		return 0
	}
	return float64(r.pods) / r.submitDur.Seconds()
}

// percentile of the sorted latencies; 0 when there are none.
func (r runResult) percentile(p float64) time.Duration { return percentile(r.latencies, p) }

// percentile of sorted latencies; 0 when there are none.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[int(p*float64(len(lat)-1))].Round(100 * time.Microsecond)
}

// fellBehind says whether the calls could not keep up with --rate: the
// pods went out below 95% of it, counting the last one's lag beyond the
// pacer's own tick (which short runs would otherwise always show).
func (r runResult) fellBehind() bool {
	if r.rate <= 0 || r.sentRate <= 0 {
		return false
	}
	return r.sentRate < 0.95*r.rate && r.sendLag > pacerTick(r.rate)
}
