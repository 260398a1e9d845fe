package main

import (
	"bytes"
	"testing"

	"github.com/berth-io/berth/bench"
)

func TestParseBenchFlags(t *testing.T) {
	var stderr bytes.Buffer
	bf, err := parseBenchFlags([]string{"--workload", "all", "--nodes", "7", "--pods", "9", "--node-cpu", "5", "--json", "out.json"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	bc := bf.cfg
	want := bench.Config{Workload: bench.WorkloadAll, Sizes: bench.Sizes{Nodes: 7, InitPods: -1, Pods: 9}, Shape: bench.Shape{NodeCPU: 5}}
	got := bench.Config{Workload: bc.Workload, Sizes: bc.Sizes, Shape: bc.Shape}
	if got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if bc.JSONPath != "out.json" {
		t.Errorf("--json parsed as %q, want out.json", bc.JSONPath)
	}
	for _, args := range [][]string{{"--batch", "0"}, {"--pods", "-1"}, {"extra"}} {
		if _, err := parseBenchFlags(args, &stderr); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestParseBenchReplicas(t *testing.T) {
	var stderr bytes.Buffer
	if _, err := parseBenchFlags([]string{"--replicas", "3", "--addr", "127.0.0.1:7070"}, &stderr); err == nil {
		t.Error("--replicas with --addr accepted")
	}
	if _, err := parseBenchFlags([]string{"--replicas", "0"}, &stderr); err == nil {
		t.Error("--replicas 0 accepted")
	}
}
