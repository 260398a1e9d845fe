package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchReplicas runs the basic workload over three in-process replicas
// sharing one embedded etcd: every pod binds, each replica binds a share,
// and the report names them.
func TestBenchReplicas(t *testing.T) {
	var out bytes.Buffer
	bc := smallBench(t, WorkloadBasic, Sizes{Nodes: 20, InitPods: -1, Pods: 300})
	bc.Replicas = 3
	results, err := runBenchmarks(context.Background(), bc, &out)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	r := results[0]
	if r.bound != 300 || len(r.replicas) != 3 {
		t.Fatalf("%d bound, %d replica stats; want 300 and 3\n%s", r.bound, len(r.replicas), out.String())
	}
	total := 0
	for _, s := range r.replicas {
		if s.bound == 0 || !strings.HasPrefix(s.id, "bench-") {
			t.Errorf("replica %q bound %d pods; want a bench- id and a share", s.id, s.bound)
		}
		total += s.bound
	}
	if total != 300 {
		t.Errorf("replicas bound %d pods in all, want 300\n%s", total, out.String())
	}
	for _, want := range []string{"3 replicas sharing one etcd", "conflict rate:", "summary: workload=basic"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
