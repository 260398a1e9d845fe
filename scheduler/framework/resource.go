package framework

// Defaults Kubernetes charges a container that requests no CPU or memory,
// used only where Kubernetes uses them (spreading scores), never for fit.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Resource is a parsed ResourceList: the common resources as fields, the
// rest in Scalar. Quantities are amounts in [0, Saturated]: a negative one
// counts as none, and sums stop at Saturated rather than wrap, so that no
// client's numbers can make a node's accounting negative or let a pod fit
// through a wrapped sum.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPodNumber is only meaningful for allocatable.
	AllowedPodNumber int64
	Scalar           map[string]int64
}

// NewResource parses a ResourceList.
func NewResource(rl ResourceList) Resource {
	var r Resource
	r.Add(rl)
	return r
}

// Add adds every quantity of rl.
func (r *Resource) Add(rl ResourceList) {
	for name, q := range rl {
		r.AddNamed(name, q)
	}
}

// AddNamed adds q of the named resource; a negative q adds nothing.
func (r *Resource) AddNamed(name string, q int64) {
	q = max(q, 0)
	switch name {
	case ResourceCPU:
		r.MilliCPU = AddQuantity(r.MilliCPU, q)
	case ResourceMemory:
		r.Memory = AddQuantity(r.Memory, q)
	case ResourceEphemeralStorage:
		r.EphemeralStorage = AddQuantity(r.EphemeralStorage, q)
	case ResourcePods:
		r.AllowedPodNumber = AddQuantity(r.AllowedPodNumber, q)
	default:
		if r.Scalar == nil {
			r.Scalar = make(map[string]int64, 1)
		}
		r.Scalar[name] = AddQuantity(r.Scalar[name], q)
	}
}

// Get returns the quantity of the named resource.
func (r *Resource) Get(name string) int64 {
	switch name {
	case ResourceCPU:
		return r.MilliCPU
	case ResourceMemory:
		return r.Memory
	case ResourceEphemeralStorage:
		return r.EphemeralStorage
	case ResourcePods:
		return r.AllowedPodNumber
	default:
		return r.Scalar[name]
	}
}

// AddResource adds o to r, each sum held at Saturated.
func (r *Resource) AddResource(o *Resource) {
	r.MilliCPU = AddQuantity(r.MilliCPU, o.MilliCPU)
	r.Memory = AddQuantity(r.Memory, o.Memory)
	r.EphemeralStorage = AddQuantity(r.EphemeralStorage, o.EphemeralStorage)
	r.AllowedPodNumber = AddQuantity(r.AllowedPodNumber, o.AllowedPodNumber)
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = make(map[string]int64, len(o.Scalar))
		}
		r.Scalar[k] = AddQuantity(r.Scalar[k], v)
	}
}

// SubResource subtracts o from r, never below zero. A saturated quantity
// stays saturated: what it stood for is unknown, so taking anything from
// it cannot be done exactly. NodeInfo recounts from its pods instead.
func (r *Resource) SubResource(o *Resource) {
	r.MilliCPU = subAmount(r.MilliCPU, o.MilliCPU)
	r.Memory = subAmount(r.Memory, o.Memory)
	r.EphemeralStorage = subAmount(r.EphemeralStorage, o.EphemeralStorage)
	r.AllowedPodNumber = subAmount(r.AllowedPodNumber, o.AllowedPodNumber)
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = make(map[string]int64, len(o.Scalar))
		}
		r.Scalar[k] = subAmount(r.Scalar[k], v)
	}
}

// setMax raises each quantity of r to at least o's.
func (r *Resource) setMax(o *Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	r.AllowedPodNumber = max(r.AllowedPodNumber, o.AllowedPodNumber)
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = make(map[string]int64, len(o.Scalar))
		}
		if v > r.Scalar[k] {
			r.Scalar[k] = v
		}
	}
}

// Clone returns a deep copy.
func (r *Resource) Clone() Resource {
	c := *r
	if r.Scalar != nil {
		c.Scalar = make(map[string]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			c.Scalar[k] = v
		}
	}
	return c
}

// ToList renders r as a ResourceList, omitting zero quantities.
func (r *Resource) ToList() ResourceList {
	rl := ResourceList{}
	for name, q := range map[string]int64{
		ResourceCPU: r.MilliCPU, ResourceMemory: r.Memory,
		ResourceEphemeralStorage: r.EphemeralStorage, ResourcePods: r.AllowedPodNumber,
	} {
		if q != 0 {
			rl[name] = q
		}
	}
	for k, v := range r.Scalar {
		if v != 0 {
			rl[k] = v
		}
	}
	return rl
}

// PodRequests computes what a pod asks of a node, as Kubernetes does: per
// resource the larger of the containers' sum and the largest init container
// (init containers run one at a time before the others), plus overhead.
// Every sum saturates (see Resource), so a pod whose numbers add up past
// the int64 range asks for Saturated, which fits nowhere.
// With nonZero, containers naming no CPU or memory are charged the defaults
// above; Kubernetes does this only for scoring.
func PodRequests(p *Pod, nonZero bool) Resource {
	var sum Resource
	for i := range p.Containers {
		r := containerRequests(&p.Containers[i], nonZero)
		sum.AddResource(&r)
	}
	inits := p.InitContainers()
	for i := range inits {
		r := containerRequests(&inits[i], nonZero)
		sum.setMax(&r)
	}
	sum.Add(p.Overhead())
	// "pods" is a node capacity, never a pod request.
	sum.AllowedPodNumber = 0
	return sum
}

// containerRequests returns a value: as a pointer it was moved to the heap,
// two allocations for every PodInfo made.
func containerRequests(c *Container, nonZero bool) Resource {
	r := NewResource(c.Requests)
	if nonZero {
		if _, ok := c.Requests[ResourceCPU]; !ok {
			r.MilliCPU = DefaultMilliCPURequest
		}
		if _, ok := c.Requests[ResourceMemory]; !ok {
			r.Memory = DefaultMemoryRequest
		}
	}
	return r
}
