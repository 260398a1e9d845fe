package replica

import (
	"errors"
	"maps"
	"os"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestParseProcessMemory(t *testing.T) {
	status := "Name:\tberth\nVmPeak:\t 2000 kB\nVmHWM:\t    4096 kB\nVmRSS:\t    1024 kB\n" +
		"RssAnon:\t     768 kB\nRssFile:\t     240 kB\nRssShmem:\t      16 kB\nThreads:\t9\n"
	m, err := parseProcessMemory([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcessMemory{Peak: 4096 << 10, Resident: 1024 << 10, Anon: 768 << 10, File: 240 << 10, Shmem: 16 << 10}
	if m != want {
		t.Errorf("parsed %+v, want %+v", m, want)
	}
	// A kernel before 4.5 gives no split: the totals still parse.
	m, err = parseProcessMemory([]byte("VmHWM:\t2 kB\nVmRSS:\t1 kB\n"))
	if err != nil || m != (ProcessMemory{Peak: 2 << 10, Resident: 1 << 10}) {
		t.Errorf("without the split: %+v, %v", m, err)
	}
	for _, bad := range []string{
		"Name:\tx\n",
		"VmHWM:\t1 MB\nVmRSS:\t1 kB\n",
		"VmHWM:\tx kB\nVmRSS:\t1 kB\n",
		"VmHWM:\t-1 kB\nVmRSS:\t1 kB\n",
		"VmHWM:\t99999999999999999 kB\nVmRSS:\t1 kB\n",
		"VmHWM:\t1 kB\nVmRSS:\t1 kB\nRssFile:\t1\n",
	} {
		if _, err := parseProcessMemory([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestProcessMemoryCollector(t *testing.T) {
	c := newProcessMemoryCollector()
	c.read = func() (ProcessMemory, error) {
		return ProcessMemory{Peak: 9, Resident: 7, Anon: 4, File: 2, Shmem: 1}, nil
	}
	got := gatherKinds(t, c)
	if want := map[string]float64{"anon": 4, "file": 2, "shmem": 1}; !maps.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	c.read = func() (ProcessMemory, error) { return ProcessMemory{}, errors.New("no /proc") }
	if got := gatherKinds(t, c); len(got) != 0 {
		t.Errorf("reported %v without /proc", got)
	}
}

// TestReplicaRegistryReportsOwnMemory reads this process's own figures
// through the registry a replica serves.
func TestReplicaRegistryReportsOwnMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/status is Linux's")
	}
	own, err := ReadProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if own.Anon <= 0 || own.File <= 0 || own.Resident < own.Anon || own.Peak < own.Resident {
		t.Fatalf("implausible figures for this process: %+v", own)
	}
	got := gatherKinds(t, newRegistry())
	if got["anon"] <= 0 || got["file"] <= 0 {
		t.Errorf("registry reported %v, want anon and file above 0", got)
	}
}

// gatherKinds returns berth_process_resident_memory_bytes by kind.
func gatherKinds(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg, ok := c.(*prometheus.Registry)
	if !ok {
		reg = prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "berth_process_resident_memory_bytes" {
			continue
		}
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("type %v, want gauge", mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
