package bench

import (
	"bufio"
	"io"
	"strconv"
)

// timelineHeader names the columns of --timeline. Times are Unix
// nanoseconds, empty when the moment never came (no --rate: no due time;
// a pod never bound).
const timelineHeader = "workload,pod,node,due_ns,call_start_ns,acked_ns,bound_ns\n"

// writeTimeline writes a row per measured pod: when it was due, when its
// call started and was answered, and when its binding arrived. The
// percentiles say how long the tail is; these rows say when it happened,
// to line up with the server's GC cycles (GODEBUG=gctrace=1) or its logs.
func (t *tracker) writeTimeline(w io.Writer, workload string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	bw := bufio.NewWriter(w)
	var row []byte
	stamp := func(ns int64) {
		row = append(row, ',')
		if ns != 0 {
			row = strconv.AppendInt(row, ns, 10)
		}
	}
	for i := range t.pods {
		p := &t.pods[i]
		if p.phase != phaseMeasured {
			continue
		}
		row = append(row[:0], workload...)
		row = append(append(append(row, ','), p.namespace...), '/')
		row = append(append(append(row, p.name...), ','), p.node...)
		stamp(p.due)
		stamp(p.submitted)
		stamp(p.ackedAt)
		stamp(p.boundAt)
		row = append(row, '\n')
		if _, err := bw.Write(row); err != nil {
			return err
		}
	}
	return bw.Flush()
}
