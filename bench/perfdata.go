package bench

import (
	"encoding/json"
	"os"
	"strconv"
	"time"
)

// PerfData is a run's results in the shape of Kubernetes' scheduler_perf
// output, so dashboards and comparison scripts built for that read ours.
type PerfData struct {
	Version   string     `json:"version"`
	DataItems []DataItem `json:"dataItems"`
}

// DataItem is one measured quantity of one workload.
type DataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

// Metric labels of the items perfData writes.
const (
	metricThroughput    = "SchedulingThroughput"
	metricSubmitToBound = "submit_to_bound"
	// Under --rate submit_to_bound runs from each pod's due time; this one
	// from its call start, the server's share.
	metricSubmitToBoundFromCall = "submit_to_bound_from_call_start"
)

// perfData turns the results into data items: per workload that bound
// pods, its throughput and its submit-to-bound latency. Skipped workloads
// and those that bound nothing have no numbers to give; failed ones are
// kept, labelled, since a partial number still says something.
func perfData(results []runResult) PerfData {
	pd := PerfData{Version: "v1", DataItems: []DataItem{}}
	for _, r := range results {
		if r.skipped != "" || len(r.latencies) == 0 {
			continue
		}
		labels := func(metric string) map[string]string {
			l := map[string]string{
				"Metric":   metric,
				"workload": r.workload,
				"nodes":    strconv.Itoa(r.nodes),
				"initPods": strconv.Itoa(r.initPods),
				"pods":     strconv.Itoa(r.pods),
			}
			if r.rate > 0 {
				l["rate"] = strconv.FormatFloat(r.rate, 'f', -1, 64)
			}
			if r.err != nil || len(r.violations) > 0 {
				l["status"] = "failed"
			}
			return l
		}
		// One number for the whole measured phase: the bench records no
		// per-interval samples to take percentiles of.
		pd.DataItems = append(pd.DataItems, DataItem{
			Data:   map[string]float64{"Average": r.podsPerSec()},
			Unit:   "pods/s",
			Labels: labels(metricThroughput),
		}, latencyItem(r.latencies, labels(metricSubmitToBound)))
		if len(r.callLatencies) > 0 {
			pd.DataItems = append(pd.DataItems, latencyItem(r.callLatencies, labels(metricSubmitToBoundFromCall)))
		}
	}
	return pd
}

// latencyItem is the percentiles of sorted latencies, in ms.
func latencyItem(lat []time.Duration, labels map[string]string) DataItem {
	return DataItem{
		Data: map[string]float64{
			"Average": ms(meanDuration(lat)),
			"Perc50":  ms(percentile(lat, 0.50)),
			"Perc90":  ms(percentile(lat, 0.90)),
			"Perc99":  ms(percentile(lat, 0.99)),
			"Perc999": ms(percentile(lat, 0.999)),
			"Max":     ms(lat[len(lat)-1]),
		},
		Unit:   "ms",
		Labels: labels,
	}
}

// writePerfData writes the results as indented JSON to path.
func writePerfData(path string, results []runResult) error {
	return writeJSON(path, perfData(results))
}

func writeJSON(path string, pd PerfData) error {
	b, err := json.MarshalIndent(pd, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func meanDuration(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
