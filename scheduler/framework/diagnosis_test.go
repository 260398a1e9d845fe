package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func rejectedBy(plugin string, code Code, reasons ...string) *Status {
	return NewStatus(code, reasons...).WithPlugin(plugin)
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestFitError(t *testing.T) {
	taint := "node(s) had untolerated taint {a: b}"
	tests := []struct {
		name   string
		fe     func() *FitError
		msg    string
		counts []ReasonCount
	}{
		{
			name: "reasons counted per node and sorted",
			fe: func() *FitError {
				m := NewNodeToStatus()
				m.Set("n1", rejectedBy("NodeResourcesFit", Unschedulable, "Insufficient cpu"))
				m.Set("n2", rejectedBy("TaintToleration", UnschedulableAndUnresolvable, taint))
				m.Set("n3", rejectedBy("TaintToleration", UnschedulableAndUnresolvable, taint))
				return &FitError{NumAllNodes: 3, Diagnosis: Diagnosis{NodeToStatus: m}}
			},
			msg: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {a: b}.",
			counts: []ReasonCount{
				{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Count: 1},
				{Plugin: "TaintToleration", Reason: taint, Count: 2},
			},
		},
		{
			name: "several reasons on one node; sorting is by string, so 10 sorts before 2",
			fe: func() *FitError {
				m := NewNodeToStatus()
				for i := range 10 {
					m.Set("a"+itoa(i), rejectedBy("NodeResourcesFit", Unschedulable, "Insufficient cpu", "Insufficient memory"))
				}
				m.Set("b", rejectedBy("NodeResourcesFit", Unschedulable, "Insufficient memory"))
				m.Set("c", rejectedBy("NodeResourcesFit", Unschedulable, "Too many pods"))
				m.Set("d", rejectedBy("NodeResourcesFit", Unschedulable, "Too many pods"))
				return &FitError{NumAllNodes: 13, Diagnosis: Diagnosis{NodeToStatus: m}}
			},
			msg: "0/13 nodes are available: 10 Insufficient cpu, 11 Insufficient memory, 2 Too many pods.",
			counts: []ReasonCount{
				{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Count: 10},
				{Plugin: "NodeResourcesFit", Reason: "Insufficient memory", Count: 11},
				{Plugin: "NodeResourcesFit", Reason: "Too many pods", Count: 2},
			},
		},
		{
			name: "absent nodes counted with the absent status",
			fe: func() *FitError {
				m := NewNodeToStatus()
				m.SetAbsentNodesStatus(NewStatus(UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [P]"))
				m.Set("n1", rejectedBy("NodeResourcesFit", Unschedulable, "Insufficient cpu"))
				return &FitError{NumAllNodes: 4, Diagnosis: Diagnosis{NodeToStatus: m}}
			},
			msg: "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [P].",
			counts: []ReasonCount{
				{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Count: 1},
				{Plugin: "", Reason: "node(s) didn't satisfy plugin(s) [P]", Count: 3},
			},
		},
		{
			name: "prefilter message replaces the per-node reasons",
			fe: func() *FitError {
				m := NewNodeToStatus()
				st := rejectedBy("Gang", UnschedulableAndUnresolvable, "waiting for 2 more members")
				m.SetAbsentNodesStatus(st)
				return &FitError{NumAllNodes: 5, Diagnosis: Diagnosis{NodeToStatus: m, PreFilterMsg: st.Message()}}
			},
			msg:    "0/5 nodes are available: waiting for 2 more members.",
			counts: []ReasonCount{{Plugin: "Gang", Reason: "waiting for 2 more members", Count: 5}},
		},
		{
			name: "postfilter message appended without a period",
			fe: func() *FitError {
				m := NewNodeToStatus()
				m.Set("n1", rejectedBy("NodeResourcesFit", Unschedulable, "Insufficient cpu"))
				return &FitError{NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: m,
					PostFilterMsg: "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."}}
			},
			msg:    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
			counts: []ReasonCount{{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Count: 1}},
		},
		{
			name:   "bare diagnosis without a map",
			fe:     func() *FitError { return &FitError{Diagnosis: Diagnosis{PreFilterMsg: "no profile"}} },
			msg:    "0/0 nodes are available: no profile.",
			counts: []ReasonCount{{Reason: "no profile", Count: 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fe := tt.fe()
			if got := fe.Error(); got != tt.msg {
				t.Errorf("Error() =\n%q\nwant\n%q", got, tt.msg)
			}
			if diff := cmp.Diff(tt.counts, fe.ReasonCounts()); diff != "" {
				t.Errorf("ReasonCounts() (-want,+got):\n%s", diff)
			}
		})
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestNodeToStatus(t *testing.T) {
	m := NewNodeToStatus()
	fit := rejectedBy("F", Unschedulable, "x")
	m.Set("a", fit)
	m.Set("b", rejectedBy("T", UnschedulableAndUnresolvable, "y"))
	if m.Get("a") != fit || m.Len() != 2 {
		t.Fatalf("Get/Len wrong")
	}
	if got := m.Get("zzz").Code(); got != UnschedulableAndUnresolvable {
		t.Errorf("absent default code = %v", got)
	}
	nodes := []*NodeInfo{ni("a"), ni("b"), ni("c")}
	lister := listerOf(nodes)
	got, _ := m.NodesForStatusCode(lister, UnschedulableAndUnresolvable)
	if diff := cmp.Diff([]string{"b", "c"}, names(got)); diff != "" {
		t.Errorf("unresolvable nodes (-want,+got):\n%s", diff)
	}
	m.SetAbsentNodesStatus(NewStatus(Unschedulable))
	got, _ = m.NodesForStatusCode(lister, Unschedulable)
	if diff := cmp.Diff([]string{"a", "c"}, names(got)); diff != "" {
		t.Errorf("unschedulable nodes (-want,+got):\n%s", diff)
	}
	var order []string
	m.ForEachExplicitNode(func(n string, _ *Status) { order = append(order, n) })
	if diff := cmp.Diff([]string{"a", "b"}, order); diff != "" {
		t.Errorf("ForEachExplicitNode order (-want,+got):\n%s", diff)
	}
}

// TestNodeToStatusRecord covers what a failed cycle does: record nodes in
// window order, most of them with one shared status.
func TestNodeToStatusRecord(t *testing.T) {
	nodes := []*NodeInfo{ni("a"), ni("b"), ni("c"), ni("d")}
	shared := rejectedBy("NodeResourcesFit", Unschedulable, "Insufficient cpu")
	taint := rejectedBy("TaintToleration", UnschedulableAndUnresolvable, "node(s) had untolerated taint")
	m := NewNodeToStatus()
	m.Grow(len(nodes))
	// Window order, starting at c.
	m.Record(nodes[2], shared)
	m.Record(nodes[3], taint)
	m.Record(nodes[0], shared)
	m.Record(nodes[1], shared)

	got, _ := m.NodesForStatusCode(listerOf(nodes), Unschedulable)
	if diff := cmp.Diff([]string{"c", "a", "b"}, names(got)); diff != "" {
		t.Errorf("unschedulable nodes, in recording order (-want,+got):\n%s", diff)
	}
	if got[0] != nodes[2] {
		t.Error("a recorded node came back as a different NodeInfo")
	}
	fe := &FitError{NumAllNodes: 5, Diagnosis: Diagnosis{NodeToStatus: m}}
	// Runs of the shared status split by another are still counted whole;
	// the node never recorded has the absent status, with no reason.
	want := []ReasonCount{
		{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Count: 3},
		{Plugin: "TaintToleration", Reason: "node(s) had untolerated taint", Count: 1},
	}
	if diff := cmp.Diff(want, fe.ReasonCounts(), cmpopts.SortSlices(func(a, b ReasonCount) bool { return a.Reason+a.Plugin < b.Reason+b.Plugin })); diff != "" {
		t.Errorf("ReasonCounts (-want,+got):\n%s", diff)
	}

	// Set after Record replaces the recorded status: the node counts once.
	fits := rejectedBy("NodePorts", Unschedulable, "node(s) didn't have free ports")
	m.Set("d", fits)
	if m.Len() != 4 || m.Get("d") != fits || m.Get("a") != shared {
		t.Errorf("after Set: Len %d, d %v, a %v", m.Len(), m.Get("d"), m.Get("a"))
	}
	m.Record(ni("e"), taint) // recorded after the index was built
	if m.Get("e") != taint {
		t.Errorf("Get(e) = %v after Record", m.Get("e"))
	}
}

func TestDiagnosisAddPluginStatus(t *testing.T) {
	var d Diagnosis
	d.AddPluginStatus(rejectedBy("A", Unschedulable))
	d.AddPluginStatus(rejectedBy("B", Pending))
	d.AddPluginStatus(NewStatus(Unschedulable)) // no plugin: ignored
	d.AddPluginStatus(AsStatus(errTest).WithPlugin("C"))
	if diff := cmp.Diff(map[string]struct{}{"A": {}, "B": {}}, d.UnschedulablePlugins); diff != "" {
		t.Errorf("UnschedulablePlugins (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]struct{}{"B": {}}, d.PendingPlugins); diff != "" {
		t.Errorf("PendingPlugins (-want,+got):\n%s", diff)
	}
}

func TestPreFilterResultMerge(t *testing.T) {
	set := func(ns ...string) *PreFilterResult {
		m := map[string]struct{}{}
		for _, n := range ns {
			m[n] = struct{}{}
		}
		return &PreFilterResult{NodeNames: m}
	}
	tests := []struct {
		name    string
		a, b    *PreFilterResult
		want    *PreFilterResult
		allNode bool
	}{
		{name: "all and all", a: nil, b: &PreFilterResult{}, allNode: true},
		{name: "all and some", a: nil, b: set("x", "y"), want: set("x", "y")},
		{name: "some and all", a: set("x"), b: nil, want: set("x")},
		{name: "intersection", a: set("x", "y"), b: set("y", "z"), want: set("y")},
		{name: "empty intersection", a: set("x"), b: set("z"), want: set()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a.Merge(tt.b)
			if got.AllNodes() != tt.allNode {
				t.Fatalf("AllNodes() = %v", got.AllNodes())
			}
			if !tt.allNode {
				if diff := cmp.Diff(tt.want.NodeNames, got.NodeNames); diff != "" {
					t.Errorf("(-want,+got):\n%s", diff)
				}
			}
		})
	}
}
