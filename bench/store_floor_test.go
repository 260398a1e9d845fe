package bench

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestStoreFloorBindsEveryPod(t *testing.T) {
	dataDir := t.TempDir()
	var out strings.Builder
	bc := Config{StoreFloor: true, Rate: 2000, Sizes: Sizes{Pods: 300}, Batch: 100, Concurrency: 8, Replicas: 1, TraceWindow: 1, Timeout: time.Minute, DataDir: dataDir}
	if err := Run(context.Background(), bc, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	// Only every pod's binding, seen on the watch, ends the run; the
	// percentiles are then of all 300.
	if !regexp.MustCompile(`all bound in \S+: \d+ pods/s, using [\d.]+ CPUs`).MatchString(out.String()) ||
		!regexp.MustCompile(`create-to-bound:  p50 \S+  p90 \S+  p99 \S+  p999 \S+  max \S+`).MatchString(out.String()) {
		t.Errorf("output lacks the run's figures:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "300 pods at 2000 pods/s") {
		t.Errorf("output does not name the run's size and rate:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "store-floor", "member")); err != nil {
		t.Errorf("etcd's data is not under --data-dir's store-floor: %v", err)
	}
}

func TestStoreFloorFlagsRefused(t *testing.T) {
	base := Config{StoreFloor: true, Rate: 100, Batch: 1, Concurrency: 1, Replicas: 1, TraceWindow: 1}
	for name, edit := range map[string]func(*Config){
		"no rate":  func(c *Config) { c.Rate = 0 },
		"addr":     func(c *Config) { c.Addr = "127.0.0.1:1" },
		"replicas": func(c *Config) { c.Replicas = 2 },
		"json":     func(c *Config) { c.JSONPath = "out.json" },
		"timeline": func(c *Config) { c.TimelinePath = "out.csv" },
	} {
		c := base
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--store-floor") {
			t.Errorf("%s: Validate = %v, want a --store-floor error", name, err)
		}
	}
	if err := base.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", base, err)
	}
}
