package replica

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// A replica on the embedded etcd maps etcd's database file into its own
// address space, and every page of it etcd reads counts in the process's
// resident set. At 100,000 nodes and 1,000,000 pods that was about 600 MB
// of a 2.8 GB RSS (issue 11). Those pages are the file's, clean: the kernel
// may drop them at any time and read them again, and GOMEMLIMIT does not
// govern them. So RSS alone says neither how close the Go heap is to its
// limit nor what the kernel could reclaim; its parts do.

// ProcessMemory is a process's memory as Linux's /proc/PID/status gives
// it, in bytes. Resident is Anon + File + Shmem.
type ProcessMemory struct {
	// Peak is the resident set's high-water mark (VmHWM).
	Peak int64
	// Resident is the resident set now (VmRSS).
	Resident int64
	// Anon is what only the process can give back (RssAnon): the Go heap,
	// stacks, the runtime's own structures.
	Anon int64
	// File is mapped files' pages (RssFile): the binary and the embedded
	// etcd's database.
	File int64
	// Shmem is shared memory (RssShmem).
	Shmem int64
}

// ReadProcessMemory reads the memory of the process pid from /proc.
func ReadProcessMemory(pid int) (ProcessMemory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ProcessMemory{}, err
	}
	return parseProcessMemory(b)
}

// parseProcessMemory takes the memory fields from a /proc/PID/status text,
// where they are in kB. VmHWM and VmRSS must be there; the Rss* split is
// 0 where the kernel (before 4.5) does not give it.
func parseProcessMemory(b []byte) (ProcessMemory, error) {
	var m ProcessMemory
	fields := map[string]*int64{"VmHWM": &m.Peak, "VmRSS": &m.Resident, "RssAnon": &m.Anon, "RssFile": &m.File, "RssShmem": &m.Shmem}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		dst := fields[key]
		if !ok || dst == nil {
			continue
		}
		v := strings.Fields(val)
		if len(v) != 2 || v[1] != "kB" {
			return m, fmt.Errorf("%s: unexpected value %q", key, val)
		}
		kb, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return m, fmt.Errorf("%s: unexpected value %q", key, val)
		}
		*dst = kb << 10
		if key == "VmHWM" || key == "VmRSS" {
			found++
		}
	}
	if found != 2 {
		return m, errors.New("no VmHWM and VmRSS in the process status")
	}
	return m, nil
}

// processMemoryCollector reports this process's resident set by kind at
// each scrape. Where there is no /proc (not Linux) it reports nothing.
type processMemoryCollector struct {
	desc *prometheus.Desc
	read func() (ProcessMemory, error)
}

func newProcessMemoryCollector() *processMemoryCollector {
	return &processMemoryCollector{
		desc: prometheus.NewDesc("berth_process_resident_memory_bytes",
			"Resident memory by kind: anon (the Go heap, stacks: what GOMEMLIMIT governs and only the process frees), "+
				"file (mapped files: the binary and the embedded etcd's database, pages the kernel may drop), shmem.",
			[]string{"kind"}, nil),
		read: func() (ProcessMemory, error) { return ReadProcessMemory(os.Getpid()) },
	}
}

func (c *processMemoryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *processMemoryCollector) Collect(ch chan<- prometheus.Metric) {
	m, err := c.read()
	if err != nil {
		return
	}
	for _, kv := range []struct {
		kind  string
		bytes int64
	}{{"anon", m.Anon}, {"file", m.File}, {"shmem", m.Shmem}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(kv.bytes), kv.kind)
	}
}
