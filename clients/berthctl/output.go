package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatWide  = "wide" // the table with more columns
)

// printer writes resources in the chosen format. In JSON a list is one
// array, a single resource one object, both indented; in YAML a list is one
// sequence. Both parse back with -f.
type printer struct {
	format string
	w      io.Writer
}

func newPrinter(format string, w io.Writer) (printer, error) {
	switch format {
	case formatTable, formatWide, formatJSON, formatYAML:
		return printer{format: format, w: w}, nil
	}
	return printer{}, usageErrorf("invalid output format %q: want table, wide, json or yaml", format)
}

// structured reports whether the format is JSON or YAML.
func (p printer) structured() bool { return p.format == formatJSON || p.format == formatYAML }

// wide reports whether tables get their extra columns.
func (p printer) wide() bool { return p.format == formatWide }

// object writes one message as JSON or YAML.
func (p printer) object(m proto.Message) error {
	tree, err := humanTree(m)
	if err != nil {
		return err
	}
	return p.tree(tree)
}

// list writes messages as one JSON array or YAML sequence.
func list[T proto.Message](p printer, ms []T) error {
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, m := range ms {
		tree, err := humanTree(m)
		if err != nil {
			return err
		}
		seq.Content = append(seq.Content, tree)
	}
	return p.tree(seq)
}

// tree writes protojson output, rewritten by humanTree, re-indented:
// protojson deliberately varies its spacing between builds, and the output
// should be stable.
func (p printer) tree(n *yaml.Node) error {
	if p.format == formatYAML {
		out, err := blockYAML(n)
		if err != nil {
			return err
		}
		_, err = p.w.Write(out)
		return err
	}
	var compact, buf bytes.Buffer
	if err := writeJSON(&compact, n); err != nil {
		return err
	}
	if err := json.Indent(&buf, compact.Bytes(), "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := p.w.Write(buf.Bytes())
	return err
}

// blockYAML writes a tree read from JSON as block-style YAML, keeping the
// key order.
func blockYAML(doc *yaml.Node) ([]byte, error) {
	var clearStyle func(n *yaml.Node)
	clearStyle = func(n *yaml.Node) {
		n.Style = 0 // JSON arrives as flow style with quoted strings
		for _, c := range n.Content {
			clearStyle(c)
		}
	}
	clearStyle(doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 3, ' ', 0) }

// nodeTable lists nodes, one per line.
func nodeTable(w io.Writer, nodes []*berthv1.Node) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tCPU\tMEMORY\tPODS\tTAINTS\tSTATUS")
	for _, n := range nodes {
		status := "Schedulable"
		switch {
		case n.GetUnreachable():
			status = "Unreachable"
		case n.GetUnschedulable():
			status = "Cordoned"
		}
		a := n.GetAllocatable()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", n.GetName(),
			formatQuantity("cpu", a["cpu"]), formatQuantity("memory", a["memory"]),
			formatQuantity("pods", a["pods"]), len(n.GetTaints()), status)
	}
	return tw.Flush()
}

// nodeWideTable is nodeTable with the rest of what a node offers and its
// labels.
func nodeWideTable(w io.Writer, nodes []*berthv1.Node) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tCPU\tMEMORY\tPODS\tEPHEMERAL-STORAGE\tOTHER RESOURCES\tTAINTS\tLEASE\tSTATUS\tLABELS")
	for _, n := range nodes {
		status := "Schedulable"
		switch {
		case n.GetUnreachable():
			status = "Unreachable"
		case n.GetUnschedulable():
			status = "Cordoned"
		}
		a := n.GetAllocatable()
		var other []string
		for _, r := range resourceNames(a) {
			if !slices.Contains([]string{"cpu", "memory", "pods", "ephemeral-storage"}, r) {
				other = append(other, r+"="+formatQuantity(r, a[r]))
			}
		}
		lease := "<none>"
		if ttl := n.GetLeaseTtlSeconds(); ttl > 0 {
			lease = fmt.Sprintf("%ds", ttl)
		}
		taints := make([]string, 0, len(n.GetTaints()))
		for _, t := range n.GetTaints() {
			taints = append(taints, formatTaint(t))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.GetName(),
			formatQuantity("cpu", a["cpu"]), formatQuantity("memory", a["memory"]), formatQuantity("pods", a["pods"]),
			formatQuantity("ephemeral-storage", a["ephemeral-storage"]), orNone(strings.Join(other, ",")),
			orNone(strings.Join(taints, ",")), lease, status, formatMap(n.GetLabels()))
	}
	return tw.Flush()
}

// nodeDetail describes one node with what its pods request against what it
// offers.
func nodeDetail(w io.Writer, n *berthv1.Node, usage *berthv1.NodeUsage) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "Name:\t%s\n", n.GetName())
	fmt.Fprintf(tw, "Labels:\t%s\n", formatMap(n.GetLabels()))
	taints := make([]string, 0, len(n.GetTaints()))
	for _, t := range n.GetTaints() {
		taints = append(taints, formatTaint(t))
	}
	fmt.Fprintf(tw, "Taints:\t%s\n", orNone(strings.Join(taints, ", ")))
	fmt.Fprintf(tw, "Unschedulable:\t%t\n", n.GetUnschedulable())
	if ttl := n.GetLeaseTtlSeconds(); ttl > 0 {
		state := "live"
		if n.GetUnreachable() {
			state = "expired: unreachable"
		}
		fmt.Fprintf(tw, "Lease:\t%ds (%s)\n", ttl, state)
	}
	fmt.Fprintf(tw, "Images:\t%d\n", len(n.GetImages()))
	fmt.Fprintf(tw, "Pods:\t%d\n", usage.GetPodCount())
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	requested := maps.Clone(usage.GetRequested())
	if requested == nil {
		requested = map[string]int64{}
	}
	requested["pods"] = usage.GetPodCount()
	tw = newTable(w)
	fmt.Fprintln(tw, "RESOURCE\tALLOCATABLE\tREQUESTED\tPERCENT")
	for _, r := range resourceNames(n.GetAllocatable(), requested) {
		alloc, req := n.GetAllocatable()[r], requested[r]
		pct := "-"
		if alloc > 0 {
			pct = fmt.Sprintf("%d%%", req*100/alloc)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r, formatQuantity(r, alloc), formatQuantity(r, req), pct)
	}
	return tw.Flush()
}

// resourceNames lists the names in any of the maps: the standard resources
// first, in a fixed order, then the rest sorted.
func resourceNames(ms ...map[string]int64) []string {
	standard := []string{"cpu", "memory", "ephemeral-storage", "pods"}
	seen := make(map[string]bool)
	for _, m := range ms {
		for k := range m {
			seen[k] = true
		}
	}
	var names []string
	for _, s := range standard {
		if seen[s] {
			names = append(names, s)
			delete(seen, s)
		}
	}
	return append(names, slices.Sorted(maps.Keys(seen))...)
}

// podTable lists pods, one per line.
func podTable(w io.Writer, pods []*berthv1.Pod) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tPHASE\tNODE\tPRIORITY\tCPU\tMEMORY")
	for _, p := range pods {
		req := podRequests(p)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.GetNamespace(), p.GetName(),
			phaseName(p.GetStatus().GetPhase()), orNone(p.GetNodeName()), p.GetPriority(),
			formatQuantity("cpu", req["cpu"]), formatQuantity("memory", req["memory"]))
	}
	return tw.Flush()
}

// podWideTable is podTable with the pod's group, nominated node and
// labels.
func podWideTable(w io.Writer, pods []*berthv1.Pod) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tPHASE\tNODE\tNOMINATED NODE\tPRIORITY\tCPU\tMEMORY\tPOD GROUP\tUID\tLABELS")
	for _, p := range pods {
		req := podRequests(p)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.GetNamespace(), p.GetName(),
			phaseName(p.GetStatus().GetPhase()), orNone(p.GetNodeName()), orNone(p.GetStatus().GetNominatedNodeName()),
			p.GetPriority(), formatQuantity("cpu", req["cpu"]), formatQuantity("memory", req["memory"]),
			orNone(p.GetPodGroup()), p.GetUid(), formatMap(p.GetLabels()))
	}
	return tw.Flush()
}

// podDetail describes one pod, with why it was last found unschedulable.
func podDetail(w io.Writer, p *berthv1.Pod) error {
	tw := newTable(w)
	st := p.GetStatus()
	fmt.Fprintf(tw, "Namespace:\t%s\n", p.GetNamespace())
	fmt.Fprintf(tw, "Name:\t%s\n", p.GetName())
	fmt.Fprintf(tw, "UID:\t%s\n", p.GetUid())
	fmt.Fprintf(tw, "Phase:\t%s\n", phaseName(st.GetPhase()))
	if st.GetMessage() != "" {
		fmt.Fprintf(tw, "Message:\t%s\n", st.GetMessage())
	}
	fmt.Fprintf(tw, "Node:\t%s\n", orNone(p.GetNodeName()))
	if st.GetNodeLost() {
		fmt.Fprintf(tw, "Node Lost:\t%s\n", "true (its lease expired while the pod was on it)")
	}
	if rs := st.GetRejections(); len(rs) > 0 {
		by := make([]string, 0, len(rs))
		for _, r := range rs {
			by = append(by, r.GetNodeName()+" ("+r.GetReason()+")")
		}
		fmt.Fprintf(tw, "Rejected By:\t%s\n", strings.Join(by, ", "))
	}
	if st.GetNominatedNodeName() != "" {
		fmt.Fprintf(tw, "Nominated Node:\t%s\n", st.GetNominatedNodeName())
	}
	if st.GetStartTime() != nil {
		fmt.Fprintf(tw, "Started:\t%s\n", st.GetStartTime().AsTime().Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "Priority:\t%d\n", p.GetPriority())
	if p.GetPodGroup() != "" {
		fmt.Fprintf(tw, "Pod Group:\t%s\n", p.GetPodGroup())
	}
	fmt.Fprintf(tw, "Labels:\t%s\n", formatMap(p.GetLabels()))
	fmt.Fprintf(tw, "Node Selector:\t%s\n", formatMap(p.GetNodeSelector()))
	tols := make([]string, 0, len(p.GetTolerations()))
	for _, t := range p.GetTolerations() {
		tols = append(tols, formatToleration(t))
	}
	fmt.Fprintf(tw, "Tolerations:\t%s\n", orNone(strings.Join(tols, ", ")))
	req := podRequests(p)
	reqs := make([]string, 0, len(req))
	for _, r := range resourceNames(req) {
		reqs = append(reqs, r+"="+formatQuantity(r, req[r]))
	}
	fmt.Fprintf(tw, "Requests:\t%s\n", orNone(strings.Join(reqs, ", ")))
	ctrs := make([]string, 0, len(p.GetContainers()))
	for _, c := range p.GetContainers() {
		ctrs = append(ctrs, c.GetName()+" ("+orNone(c.GetImage())+")")
	}
	fmt.Fprintf(tw, "Containers:\t%s\n", strings.Join(ctrs, ", "))
	if d := st.GetDiagnosis(); d != nil {
		fmt.Fprintf(tw, "Diagnosis:\t%s\n", formatDiagnosis(d))
	}
	return tw.Flush()
}

// formatDiagnosis writes a failed attempt the way kube-scheduler's event
// does, naming the plugin behind each reason.
func formatDiagnosis(d *berthv1.SchedulingDiagnosis) string {
	parts := make([]string, 0, len(d.GetReasons()))
	for _, r := range d.GetReasons() {
		s := fmt.Sprintf("%d %s", r.GetNodeCount(), r.GetReason())
		if r.GetPlugin() != "" {
			s += " (" + r.GetPlugin() + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", d.GetNodesEvaluated(), strings.Join(parts, ", "))
}

// podRequests is what the pod asks of a node, as the scheduler counts it:
// the larger of the containers' sum and any single init container, plus
// overhead.
func podRequests(p *berthv1.Pod) map[string]int64 {
	req := make(map[string]int64)
	for _, c := range p.GetContainers() {
		for r, v := range c.GetRequests() {
			req[r] += v
		}
	}
	for _, c := range p.GetInitContainers() {
		for r, v := range c.GetRequests() {
			req[r] = max(req[r], v)
		}
	}
	for r, v := range p.GetOverhead() {
		req[r] += v
	}
	return req
}

func formatTaint(t *berthv1.Taint) string {
	s := t.GetKey()
	if t.GetValue() != "" {
		s += "=" + t.GetValue()
	}
	return s + ":" + effectName(t.GetEffect())
}

func formatToleration(t *berthv1.Toleration) string {
	s := t.GetKey()
	if s == "" {
		s = "*"
	}
	if t.GetOperator() != berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS {
		s += "=" + t.GetValue()
	}
	if t.GetEffect() != berthv1.TaintEffect_TAINT_EFFECT_UNSPECIFIED {
		s += ":" + effectName(t.GetEffect())
	}
	if t.GetTolerationSeconds() > 0 {
		s += fmt.Sprintf(" for %ds", t.GetTolerationSeconds())
	}
	return s
}

func formatMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return orNone(strings.Join(parts, ","))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// Column widths of watch lines. Lines are printed one at a time as events
// arrive, so they are padded rather than aligned by a tabwriter.
const watchLineFormat = "%-8s %-40s %-24s %s\n"

func watchHeader(w io.Writer) {
	fmt.Fprintf(w, watchLineFormat, "TYPE", "NAMESPACE/NAME", "NODE", "REVISION")
}

func watchLine(w io.Writer, ev *berthv1.BindingEvent) {
	typ := strings.TrimPrefix(ev.GetType().String(), "BINDING_EVENT_TYPE_")
	fmt.Fprintf(w, watchLineFormat, typ, ev.GetNamespace()+"/"+ev.GetName(), ev.GetNodeName(), fmt.Sprint(ev.GetRevision()))
}
