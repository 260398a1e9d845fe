package framework

import (
	"math"
	"math/bits"
)

// Saturated is where resource sums stop instead of wrapping past
// math.MaxInt64. It reads as "at least this much": no node offers it, so
// a request that saturates never fits, and a node whose accounting
// saturated takes no pod asking for that resource. A wrapped sum would be
// negative instead, and a negative request fits everywhere.
const Saturated int64 = math.MaxInt64

// AddQuantity returns a+b, held at the int64 bounds instead of wrapping.
func AddQuantity(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// SubQuantity returns a-b, held at the int64 bounds instead of wrapping.
func SubQuantity(a, b int64) int64 {
	s := a - b
	switch {
	case b < 0 && s < a:
		return math.MaxInt64
	case b > 0 && s > a:
		return math.MinInt64
	}
	return s
}

// Exceeds is the fit test of one resource: whether req more on top of used
// goes past allocatable. As in Kubernetes, a resource the pod does not
// request is never short, so an over-committed node still takes a pod
// asking for none of it. A total that saturates exceeds any allocatable,
// even math.MaxInt64: the true total is unknown beyond it.
func Exceeds(req, used, allocatable int64) bool {
	if req <= 0 {
		return false
	}
	total := AddQuantity(max(used, 0), req)
	return total == Saturated || total > allocatable
}

// ScaledRatio returns part*scale/whole, truncated, with part held to
// [0, whole]: the share of a capacity in score units. The product is taken
// in 128 bits, since quantities near the int64 limit times a score scale
// overflow 64 (a node of 2^62 bytes of memory is a client's to claim).
// A non-positive whole or scale gives 0.
func ScaledRatio(part, whole, scale int64) int64 {
	if whole <= 0 || part <= 0 || scale <= 0 {
		return 0
	}
	part = min(part, whole)
	// part <= whole makes hi < whole, which Div64 needs, and the quotient
	// at most scale.
	hi, lo := bits.Mul64(uint64(part), uint64(scale))
	q, _ := bits.Div64(hi, lo, uint64(whole))
	return int64(q)
}

func subAmount(a, b int64) int64 {
	if a == Saturated {
		return a
	}
	return max(SubQuantity(a, b), 0)
}

// Saturated reports whether any quantity of r reached Saturated.
func (r *Resource) Saturated() bool {
	if r.MilliCPU == Saturated || r.Memory == Saturated || r.EphemeralStorage == Saturated || r.AllowedPodNumber == Saturated {
		return true
	}
	for _, v := range r.Scalar {
		if v == Saturated {
			return true
		}
	}
	return false
}

func (f *Freed) add(o *Freed) {
	f.Pods += o.Pods
	f.MilliCPU = AddQuantity(f.MilliCPU, o.MilliCPU)
	f.Memory = AddQuantity(f.Memory, o.Memory)
	f.EphemeralStorage = AddQuantity(f.EphemeralStorage, o.EphemeralStorage)
}

func (f *Freed) saturated() bool {
	return f.MilliCPU == Saturated || f.Memory == Saturated || f.EphemeralStorage == Saturated
}

func freedBy(pi *PodInfo) Freed {
	return Freed{Pods: 1, MilliCPU: pi.Requests.MilliCPU, Memory: pi.Requests.Memory, EphemeralStorage: pi.Requests.EphemeralStorage}
}

// RecountRequests sets Requested and NonZeroRequested to the sums over
// Pods: for a saturated sum, which subtraction cannot undo, and for copies
// that took pods away without RemovePod.
func (n *NodeInfo) RecountRequests() {
	n.Requested, n.NonZeroRequested = Resource{}, Resource{}
	for _, pi := range n.Pods {
		n.Requested.AddResource(&pi.Requests)
		n.NonZeroRequested.AddResource(&pi.NonZeroRequests)
	}
}
