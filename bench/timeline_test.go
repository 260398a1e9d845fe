package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTimelineRowPerMeasuredPod runs a paced bench with --timeline: a row
// per measured pod, each bound to a node, its moments in order.
func TestTimelineRowPerMeasuredPod(t *testing.T) {
	var out bytes.Buffer
	bc := smallBench(t, WorkloadBasic, Sizes{Nodes: 5, InitPods: 10, Pods: 40})
	bc.Rate = 2000
	bc.TimelinePath = filepath.Join(t.TempDir(), "timeline.csv")
	if err := Run(context.Background(), bc, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	f, err := os.Open(bc.TimelinePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rows[0], ",")+"\n", timelineHeader; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	if len(rows) != 1+40 {
		t.Fatalf("%d rows after the header, want one per measured pod (40), none for the init pods", len(rows)-1)
	}
	pods := map[string]bool{}
	for _, r := range rows[1:] {
		if r[0] != WorkloadBasic || r[2] == "" || pods[r[1]] {
			t.Fatalf("row %q: want workload basic, a node, and a pod not seen before", r)
		}
		pods[r[1]] = true
		var ns [4]int64
		for i := range ns {
			if ns[i], err = strconv.ParseInt(r[3+i], 10, 64); err != nil || ns[i] <= 0 {
				t.Fatalf("row %q: column %d is not a time", r, 3+i)
			}
		}
		due, start, acked, bound := ns[0], ns[1], ns[2], ns[3]
		// The binding can arrive before the call's answer, not before
		// the call started.
		if start < due || acked < start || bound < start {
			t.Errorf("row %q: want due <= call start <= acked, and bound after the call started", r)
		}
	}
}
