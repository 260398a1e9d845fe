// Package trace reads the Alibaba "OpenB" GPU cluster trace
// (cluster-trace-gpu-v2023) that berth bench --workload alibaba replays:
// its node and pod lists, and the creations and deletions they imply, in
// the order a replay plays them.
package trace

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// The trace is read from a directory outside the repository at run time;
// only a tiny synthetic copy lives in testdata.
const (
	NodeFile = "openb_node_list_all_node.csv"
	PodFile  = "openb_pod_list_default.csv"
	// GPUResource is the extended resource a trace node's GPUs become.
	GPUResource = "alibaba.com/gpu"
	// ModelLabel carries a node's GPU model (absent on CPU-only nodes).
	ModelLabel = "alibaba.com/gpu-model"
	// DirFromRoot is where the trace sits relative to an ancestor of
	// the working directory (the repository's parent, in this project).
	DirFromRoot = "shared/traces/alibaba-openb-2023"
)

// Node is one row of the node list.
type Node struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int64
	Model     string
}

// Pod is one row of the pod list. Times are seconds from the start of
// the trace.
type Pod struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int64
	// GPUMilli is the share of each GPU a GPU-sharing pod uses. Berth has no
	// fractional resources, so a sharing pod is replayed as one whole GPU.
	GPUMilli int64
	Created  int64
	// Deleted is the deletion time; HasDeletion is false when the row has
	// none, and the replay then deletes the pod after the last event.
	Deleted     int64
	HasDeletion bool
}

// EventKind orders events that share a timestamp: deletions first, so
// the room they free is there for the creations of the same second; then
// creations; then the deletions of pods that lived zero seconds, which
// must follow their own creation.
type EventKind int

const (
	Delete EventKind = iota
	Create
	DeleteAfterCreate
)

func (k EventKind) String() string {
	switch k {
	case Create:
		return "create"
	default:
		return "delete"
	}
}

// Event is one creation or deletion of Pod (an index into the pod list).
type Event struct {
	Time int64
	Kind EventKind
	Pod  int
}

// Trace is a loaded trace, its events ordered for replay.
type Trace struct {
	Nodes  []Node
	Pods   []Pod
	Events []Event
}

// Load reads the node and pod lists from dir. maxNodes and maxPods,
// when positive, keep only the first nodes of the list and the first pods
// by creation order, so a run can be shrunk.
func Load(dir string, maxNodes, maxPods int) (*Trace, error) {
	nodes, err := readFile(filepath.Join(dir, NodeFile), parseNodes)
	if err != nil {
		return nil, err
	}
	pods, err := readFile(filepath.Join(dir, PodFile), parsePods)
	if err != nil {
		return nil, err
	}
	if maxNodes > 0 && maxNodes < len(nodes) {
		nodes = nodes[:maxNodes]
	}
	if maxPods > 0 && maxPods < len(pods) {
		slices.SortStableFunc(pods, func(a, b Pod) int { return cmp.Compare(a.Created, b.Created) })
		pods = pods[:maxPods]
	}
	if len(nodes) == 0 || len(pods) == 0 {
		return nil, fmt.Errorf("trace %s: no nodes or no pods", dir)
	}
	return &Trace{Nodes: nodes, Pods: pods, Events: replayOrder(pods)}, nil
}

func readFile[T any](path string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// replayOrder lists every pod's creation and deletion in replay order: by
// time, then by kind (see EventKind), then by position in the pod
// list, which makes ties deterministic. Pods without a deletion time are
// deleted after every other event.
func replayOrder(pods []Pod) []Event {
	var end int64
	for _, p := range pods {
		end = max(end, p.Created+1, p.Deleted+1)
	}
	events := make([]Event, 0, 2*len(pods))
	for i, p := range pods {
		events = append(events, Event{Time: p.Created, Kind: Create, Pod: i})
		switch {
		case !p.HasDeletion:
			events = append(events, Event{Time: end, Kind: Delete, Pod: i})
		case p.Deleted <= p.Created:
			events = append(events, Event{Time: p.Created, Kind: DeleteAfterCreate, Pod: i})
		default:
			events = append(events, Event{Time: p.Deleted, Kind: Delete, Pod: i})
		}
	}
	slices.SortFunc(events, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Pod, b.Pod))
	})
	return events
}

// FindDir walks up from dir looking for DirFromRoot; "" when no
// ancestor has it.
func FindDir(dir string) string {
	// A few levels cover the repository's own directories (go test runs in
	// bench/trace, two below the root, whose sibling is shared/); going
	// further would find unrelated trees.
	for up := 0; up <= maxSearchUp; up++ {
		candidate := filepath.Join(dir, DirFromRoot)
		if _, err := os.Stat(filepath.Join(candidate, PodFile)); err == nil {
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}

// maxSearchUp is how many parent directories FindDir looks in.
const maxSearchUp = 4

// csvTable reads a CSV with a header row and looks columns up by name, so
// the parsers do not depend on column order.
type csvTable struct {
	r    *csv.Reader
	cols map[string]int
	row  []string
	line int
}

func newCSVTable(r io.Reader, required ...string) (*csvTable, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	t := &csvTable{r: cr, cols: map[string]int{}, line: 1}
	for i, name := range header {
		t.cols[name] = i
	}
	for _, name := range required {
		if _, ok := t.cols[name]; !ok {
			return nil, fmt.Errorf("header lacks column %q", name)
		}
	}
	cr.FieldsPerRecord = len(header)
	return t, nil
}

// next advances to the next row; false at the end.
func (t *csvTable) next() (bool, error) {
	row, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	t.row, t.line = row, t.line+1
	return true, nil
}

func (t *csvTable) str(col string) string { return t.row[t.cols[col]] }

// int reads a non-negative integer column; an empty cell is 0 unless
// required.
func (t *csvTable) int(col string, required bool) (int64, bool, error) {
	s := t.str(col)
	if s == "" {
		if required {
			return 0, false, fmt.Errorf("line %d: %s is empty", t.line, col)
		}
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false, fmt.Errorf("line %d: %s: %q is not a non-negative integer", t.line, col, s)
	}
	return v, true, nil
}

// parseNodes reads the node list: sn,cpu_milli,memory_mib,gpu,model.
func parseNodes(r io.Reader) ([]Node, error) {
	t, err := newCSVTable(r, "sn", "cpu_milli", "memory_mib", "gpu", "model")
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nodes, nil
		}
		n := Node{Name: t.str("sn"), Model: t.str("model")}
		if n.Name == "" {
			return nil, fmt.Errorf("line %d: sn is empty", t.line)
		}
		if n.CPUMilli, _, err = t.int("cpu_milli", true); err != nil {
			return nil, err
		}
		if n.MemoryMiB, _, err = t.int("memory_mib", true); err != nil {
			return nil, err
		}
		if n.GPUs, _, err = t.int("gpu", false); err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
}

// parsePods reads the pod list; columns other than those below are
// ignored (gpu_spec is empty throughout the default list; qos, pod_phase
// and scheduled_time describe the production scheduler's outcome).
func parsePods(r io.Reader) ([]Pod, error) {
	t, err := newCSVTable(r, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time")
	if err != nil {
		return nil, err
	}
	var pods []Pod
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return pods, nil
		}
		p := Pod{Name: t.str("name")}
		if p.Name == "" {
			return nil, fmt.Errorf("line %d: name is empty", t.line)
		}
		if p.CPUMilli, _, err = t.int("cpu_milli", true); err != nil {
			return nil, err
		}
		if p.MemoryMiB, _, err = t.int("memory_mib", true); err != nil {
			return nil, err
		}
		if p.GPUs, _, err = t.int("num_gpu", false); err != nil {
			return nil, err
		}
		if p.GPUMilli, _, err = t.int("gpu_milli", false); err != nil {
			return nil, err
		}
		if p.Created, _, err = t.int("creation_time", true); err != nil {
			return nil, err
		}
		if p.Deleted, p.HasDeletion, err = t.int("deletion_time", false); err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
}
