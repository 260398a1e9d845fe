package limits

import (
	"fmt"
	"math/bits"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// MaxQuantity bounds every resource quantity Berth accepts: one request, a
// pod's total (containers plus overhead, or an init container plus
// overhead), and a node's allocatable. 2^53 is 9 peta-units (9 PB of memory,
// 9·10^12 cores), far above any machine, and every value up to it converts
// to float64 exactly, which scoring relies on. Bounding the inputs keeps a
// node's sums far from int64's edge; the core also saturates, so even a
// value that slipped past here could not wrap.
const MaxQuantity int64 = 1 << 53

// Quantities checks a pod's resource quantities: each within 0..MaxQuantity,
// and the pod's effective request per resource (the larger of the
// containers' sum and the largest init container, plus overhead) within
// MaxQuantity too.
func Quantities(field string, p *berthv1.Pod) []Violation {
	var found []Violation
	add := func(f, format string, args ...any) {
		if len(found) < maxViolations {
			found = append(found, Violation{Field: f, Description: fmt.Sprintf(format, args...)})
		}
	}
	// The field's name is spelled only for a violation, and the sum of
	// everything bounds every total the pod can reach: a valid pod costs
	// neither strings nor a map of totals.
	var all uint64
	each := func(list string, i int, rl map[string]int64) {
		for name, q := range rl {
			if q < 0 || q > MaxQuantity {
				f := field + ".overhead"
				if i >= 0 {
					f = fmt.Sprintf("%s.%s[%d].requests", field, list, i)
				}
				add(f+"["+name+"]", "must be 0 to %d, got %d", MaxQuantity, q)
				continue
			}
			all = satAdd(all, uint64(q))
		}
	}
	for i, c := range p.GetContainers() {
		each("containers", i, c.GetRequests())
	}
	for i, c := range p.GetInitContainers() {
		each("init_containers", i, c.GetRequests())
	}
	each("overhead", -1, p.GetOverhead())
	if len(found) > 0 || all <= uint64(MaxQuantity) {
		return found
	}
	for name, total := range effectiveRequests(p) {
		if total > uint64(MaxQuantity) {
			add(field, "the pod's total request of %s (containers or largest init container, plus overhead) is over %d", name, MaxQuantity)
		}
	}
	return found
}

// effectiveRequests sums in uint64 with carry saturation: with every input
// already within MaxQuantity and at most a few hundred of them the sum cannot
// wrap, but the check must hold for whatever the caller passes.
func effectiveRequests(p *berthv1.Pod) map[string]uint64 {
	totals := map[string]uint64{}
	for _, c := range p.GetContainers() {
		for name, q := range c.GetRequests() {
			totals[name] = satAdd(totals[name], uint64(q))
		}
	}
	for _, c := range p.GetInitContainers() {
		for name, q := range c.GetRequests() {
			totals[name] = max(totals[name], uint64(q))
		}
	}
	for name, q := range p.GetOverhead() {
		totals[name] = satAdd(totals[name], uint64(q))
	}
	return totals
}

func satAdd(a, b uint64) uint64 {
	sum, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return sum
}

// Allocatable checks a node's allocatable quantities.
func Allocatable(field string, n *berthv1.Node) []Violation {
	var found []Violation
	for name, q := range n.GetAllocatable() {
		if (q < 0 || q > MaxQuantity) && len(found) < maxViolations {
			found = append(found, Violation{Field: field + ".allocatable[" + name + "]", Description: fmt.Sprintf("must be 0 to %d, got %d", MaxQuantity, q)})
		}
	}
	return found
}
