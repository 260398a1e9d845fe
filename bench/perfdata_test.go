package bench

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPerfData(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	results := []runResult{
		{workload: "basic", nodes: 20, initPods: 0, pods: 100, bound: 100, elapsed: 2 * time.Second, latencies: lat},
		{workload: "alibaba", skipped: "no trace"},
		{workload: "preemption", nodes: 5, initPods: 10, pods: 4, bound: 1, elapsed: time.Second,
			latencies: []time.Duration{3 * time.Millisecond}, err: errors.New("stalled")},
	}
	want := PerfData{Version: "v1", DataItems: []DataItem{
		{Data: map[string]float64{"Average": 50}, Unit: "pods/s",
			Labels: map[string]string{"Metric": "SchedulingThroughput", "workload": "basic", "nodes": "20", "initPods": "0", "pods": "100"}},
		{Data: map[string]float64{"Average": 50.5, "Perc50": 50, "Perc90": 90, "Perc99": 99, "Perc999": 99, "Max": 100}, Unit: "ms",
			Labels: map[string]string{"Metric": "submit_to_bound", "workload": "basic", "nodes": "20", "initPods": "0", "pods": "100"}},
		{Data: map[string]float64{"Average": 1}, Unit: "pods/s",
			Labels: map[string]string{"Metric": "SchedulingThroughput", "workload": "preemption", "nodes": "5", "initPods": "10", "pods": "4", "status": "failed"}},
		{Data: map[string]float64{"Average": 3, "Perc50": 3, "Perc90": 3, "Perc99": 3, "Perc999": 3, "Max": 3}, Unit: "ms",
			Labels: map[string]string{"Metric": "submit_to_bound", "workload": "preemption", "nodes": "5", "initPods": "10", "pods": "4", "status": "failed"}},
	}}
	if diff := cmp.Diff(want, perfData(results)); diff != "" {
		t.Errorf("perfData (-want,+got):\n%s", diff)
	}

	// The file holds the same, in the field names scheduler_perf uses.
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := writePerfData(path, results); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Version   string `json:"version"`
		DataItems []struct {
			Data   map[string]float64 `json:"data"`
			Unit   string             `json:"unit"`
			Labels map[string]string  `json:"labels"`
		} `json:"dataItems"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	if raw.Version != "v1" || len(raw.DataItems) != 4 || raw.DataItems[1].Data["Perc99"] != 99 || raw.DataItems[1].Unit != "ms" {
		t.Errorf("file does not read back as written:\n%s", b)
	}
}

func TestPerfDataEmpty(t *testing.T) {
	// An empty list, not null: a reader iterates dataItems unconditionally.
	b, err := json.Marshal(perfData(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"version":"v1","dataItems":[]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// Under --rate the headline submit_to_bound runs from each pod's due time;
// the call-start figure follows under a name of its own.
func TestPerfDataRate(t *testing.T) {
	r := runResult{workload: "basic", nodes: 20, pods: 2, bound: 2, elapsed: time.Second, rate: 1000,
		latencies:     []time.Duration{10 * time.Millisecond, 30 * time.Millisecond},
		callLatencies: []time.Duration{2 * time.Millisecond, 4 * time.Millisecond}}
	labels := func(metric string) map[string]string {
		return map[string]string{"Metric": metric, "workload": "basic", "nodes": "20", "initPods": "0", "pods": "2", "rate": "1000"}
	}
	want := PerfData{Version: "v1", DataItems: []DataItem{
		{Data: map[string]float64{"Average": 2}, Unit: "pods/s", Labels: labels("SchedulingThroughput")},
		{Data: map[string]float64{"Average": 20, "Perc50": 10, "Perc90": 10, "Perc99": 10, "Perc999": 10, "Max": 30}, Unit: "ms",
			Labels: labels("submit_to_bound")},
		{Data: map[string]float64{"Average": 3, "Perc50": 2, "Perc90": 2, "Perc99": 2, "Perc999": 2, "Max": 4}, Unit: "ms",
			Labels: labels("submit_to_bound_from_call_start")},
	}}
	if diff := cmp.Diff(want, perfData([]runResult{r})); diff != "" {
		t.Errorf("perfData (-want,+got):\n%s", diff)
	}
}
