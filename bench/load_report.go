package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Metric labels of the items loadPerfData adds to the bench's.
const (
	metricStoreAll      = "time_to_store_all"
	metricSubmitRate    = "SubmitThroughput"
	metricServerMemory  = "server_memory"
	metricServerCPU     = "server_cpu"
	metricRestart       = "restart"
	metricStartupPhases = "startup_phases"
)

// printLoaded prints the bench's throughput and latency lines, then the
// load's own: time to store and memory.
func printLoaded(out io.Writer, r loadResult) {
	printDetails(out, r.run)
	if r.allStored() {
		fmt.Fprintf(out, "time to store:    %s for all %d pods (every SubmitPods acknowledged, durable)\n",
			r.run.submitDur.Round(time.Millisecond), r.run.pods)
	} else {
		fmt.Fprintf(out, "stored:           %d of %d pods\n", r.stored, r.run.pods)
	}
	if r.retried > 0 {
		fmt.Fprintf(out, "retried:          %d pods refused for a transient reason (Unavailable, ResourceExhausted) were sent again\n", r.retried)
	}
	if r.run.serverCPU > 0 {
		fmt.Fprintf(out, "server CPU:       %s (user + system) over the measured pods, %.0f ms per 1,000 pods bound\n",
			r.run.serverCPU.Round(10*time.Millisecond), r.run.cpuPerThousand())
	}
	if r.loaded.Peak > 0 {
		fmt.Fprintf(out, "server memory:    peak %s (VmHWM, pid %d), %s after the load (VmRSS: %s anonymous, %s of mapped files); per pod %s peak, %s after\n",
			formatBytes(r.loaded.Peak), r.pid, formatBytes(r.loaded.Resident), formatBytes(r.loaded.Anon), formatBytes(r.loaded.File),
			formatPerPod(r.loaded.Peak, r.run.pods), formatPerPod(r.loaded.Resident, r.run.pods))
	}
}

// allStored says whether every pod was acknowledged, so the submission
// time is the time to store them all.
func (r loadResult) allStored() bool {
	return r.run.submitDur > 0 && r.stored == r.run.pods
}

// storeTime is the time to store all pods, 0 when some were not.
func (r loadResult) storeTime() time.Duration {
	if !r.allStored() {
		return 0
	}
	return r.run.submitDur
}

// submitRate is the rate of durable acknowledgements, 0 when some pods
// were not acknowledged.
func (r loadResult) submitRate() float64 {
	if !r.allStored() {
		return 0
	}
	return r.run.submitPerSec()
}

// printLoadEnd prints a failure the load's lines did not, and the summary.
func printLoadEnd(out io.Writer, r loadResult) {
	if r.err != nil && (r.run.err == nil || !errors.Is(r.err, r.run.err)) {
		fmt.Fprintf(out, "FAILED: %v\n", r.err)
	}
	fmt.Fprintln(out, loadSummary(r))
}

// printRestart prints one restart's line as soon as it is measured.
func printRestart(out io.Writer, rr restartResult) {
	if rr.round > 0 {
		fmt.Fprintf(out, "round %d: ", rr.round)
	}
	fmt.Fprintf(out, "restart after %s: stopped in %s; new berth serve pid %d SERVING in %s (CPU %s user, %s system), first new pod bound in %s (on %s); peak %s by then\n",
		signalName(rr.signal), rr.stop.Round(time.Millisecond), rr.pid, rr.toServing.Round(time.Millisecond),
		rr.cpuToServing.user.Round(10*time.Millisecond), rr.cpuToServing.system.Round(10*time.Millisecond),
		rr.toBound.Round(time.Millisecond), rr.node, formatBytes(rr.mem.Peak))
	if len(rr.phases) > 0 {
		fmt.Fprintf(out, "  start-up phases ended, from the replica's start: %s\n", formatPhases(rr.phases))
	}
}

// timingSpread is the least, median and greatest of some timings; with an
// even count the median is the lower of the middle two, a timing that
// was measured.
type timingSpread struct{ min, median, max time.Duration }

func spreadOf(ds []time.Duration) timingSpread {
	if len(ds) == 0 {
		return timingSpread{}
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return timingSpread{ds[0], ds[(len(ds)-1)/2], ds[len(ds)-1]}
}

func (s timingSpread) String() string {
	return fmt.Sprintf("%s / %s / %s", s.min.Round(time.Millisecond), s.median.Round(time.Millisecond), s.max.Round(time.Millisecond))
}

// restartSpreads gives, over the restarts after sig that succeeded, the
// spread of their times to SERVING and to the first new binding.
func restartSpreads(rs []restartResult, sig syscall.Signal) (serving, bound timingSpread) {
	var toServing, toBound []time.Duration
	for _, rr := range rs {
		if rr.signal == sig && rr.err == nil {
			toServing, toBound = append(toServing, rr.toServing), append(toBound, rr.toBound)
		}
	}
	return spreadOf(toServing), spreadOf(toBound)
}

// printRestartSpread prints, after several rounds, the spread of each
// kind of restart.
func printRestartSpread(out io.Writer, rs []restartResult, rounds int) {
	fmt.Fprintf(out, "restarts over %d rounds, min / median / max:\n", rounds)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		serving, bound := restartSpreads(rs, sig)
		fmt.Fprintf(out, "  after %s: SERVING in %s; first new pod bound in %s\n", signalName(sig), serving, bound)
	}
}

// loadSummary is the one-line summary, in the bench's key=value form;
// absent figures are 0. Restart figures are medians over the rounds.
func loadSummary(r loadResult) string {
	termServing, termBound := restartSpreads(r.restarts, syscall.SIGTERM)
	killServing, killBound := restartSpreads(r.restarts, syscall.SIGKILL)
	return fmt.Sprintf("summary: workload=%s nodes=%d pods=%d bound=%d retried=%d submit-pods/s=%.0f pods/s=%.0f server-cpu-ms/1k-pods=%.0f store-all=%s peak-rss=%d rss-after=%d anon-after=%d file-after=%d peak-bytes/pod=%d bytes/pod-after=%d term-serving=%s term-bound=%s kill-serving=%s kill-bound=%s status=%q",
		r.run.workload, r.run.nodes, r.run.pods, r.run.bound, r.retried, r.submitRate(), r.run.podsPerSec(), r.run.cpuPerThousand(),
		r.storeTime().Round(time.Millisecond), r.loaded.Peak, r.loaded.Resident, r.loaded.Anon, r.loaded.File, perPod(r.loaded.Peak, r.run.pods), perPod(r.loaded.Resident, r.run.pods),
		termServing.median.Round(time.Millisecond), termBound.median.Round(time.Millisecond),
		killServing.median.Round(time.Millisecond), killBound.median.Round(time.Millisecond), firstLine(r.err))
}

// loadPerfData is the bench's items for the load (throughput, latency)
// and, labelled alike, the time to store every pod, the submit rate, the
// server's memory after the load and after each restart, and each
// restart's timings.
func loadPerfData(r loadResult) PerfData {
	pd := perfData([]runResult{r.run})
	if r.err != nil {
		// A failed restart fails the run: say so on the load's items too.
		for _, it := range pd.DataItems {
			it.Labels["status"] = "failed"
		}
	}
	labels := func(metric string, extra ...string) map[string]string {
		l := map[string]string{
			"Metric": metric, "workload": r.run.workload,
			"nodes": strconv.Itoa(r.run.nodes), "initPods": "0", "pods": strconv.Itoa(r.run.pods),
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		if r.err != nil {
			l["status"] = "failed"
		}
		return l
	}
	if r.allStored() {
		pd.DataItems = append(pd.DataItems,
			DataItem{Data: map[string]float64{"Average": ms(r.run.submitDur)}, Unit: "ms", Labels: labels(metricStoreAll)},
			DataItem{Data: map[string]float64{"Average": r.run.submitPerSec()}, Unit: "pods/s", Labels: labels(metricSubmitRate)})
	}
	if r.run.serverCPU > 0 {
		pd.DataItems = append(pd.DataItems, DataItem{
			Data: map[string]float64{"Total": ms(r.run.serverCPU), "PerThousandPods": r.run.cpuPerThousand()},
			Unit: "ms", Labels: labels(metricServerCPU),
		})
	}
	if r.loaded.Peak > 0 {
		pd.DataItems = append(pd.DataItems, DataItem{
			Data: map[string]float64{
				"Peak": float64(r.loaded.Peak), "AfterLoad": float64(r.loaded.Resident),
				"AfterLoadAnon": float64(r.loaded.Anon), "AfterLoadFile": float64(r.loaded.File),
				"PeakPerPod": float64(perPod(r.loaded.Peak, r.run.pods)), "AfterLoadPerPod": float64(perPod(r.loaded.Resident, r.run.pods)),
			},
			Unit: "bytes", Labels: labels(metricServerMemory, "phase", "load"),
		})
	}
	for _, rr := range r.restarts {
		if rr.err != nil {
			continue
		}
		which := []string{"signal", signalName(rr.signal)} // labels naming the restart
		if rr.round > 0 {
			which = append(which, "round", strconv.Itoa(rr.round))
		}
		pd.DataItems = append(pd.DataItems, DataItem{
			Data: map[string]float64{"Stop": ms(rr.stop), "ToServing": ms(rr.toServing), "ToFirstBinding": ms(rr.toBound),
				"CPUUserToServing": ms(rr.cpuToServing.user), "CPUSystemToServing": ms(rr.cpuToServing.system)},
			Unit: "ms", Labels: labels(metricRestart, which...),
		})
		if len(rr.phases) > 0 {
			ends := map[string]float64{}
			for _, p := range rr.phases {
				ends[p.name] = ms(p.end)
			}
			pd.DataItems = append(pd.DataItems, DataItem{Data: ends, Unit: "ms", Labels: labels(metricStartupPhases, which...)})
		}
		pd.DataItems = append(pd.DataItems, DataItem{
			Data: map[string]float64{"Peak": float64(rr.mem.Peak), "AtFirstBinding": float64(rr.mem.Resident)},
			Unit: "bytes", Labels: labels(metricServerMemory, append([]string{"phase", "restart"}, which...)...),
		})
	}
	return pd
}

func perPod(bytes int64, pods int) int64 {
	if pods <= 0 {
		return 0
	}
	return bytes / int64(pods)
}

func formatPerPod(bytes int64, pods int) string {
	return strconv.FormatInt(perPod(bytes, pods), 10) + " B"
}
