package framework

// PodExtras are the fields of a Pod that most pods leave unset: at a
// million pods, 128 bytes per pod for fields a basic pod never fills was a
// tenth of the core's heap. A Pod holds them behind one pointer, and its
// accessors of the same names read them as zero when it has none.
type PodExtras struct {
	InitContainers    []Container
	Overhead          ResourceList
	SchedulingGates   []string
	NominatedNodeName string
	// StatusMessage is the last recorded status message, so an unchanged
	// diagnosis is not written again on every retry.
	StatusMessage string
	// PreemptedBy names the preemptor (namespace/name) once the pod was
	// chosen as a victim; the orchestrator is expected to stop it.
	PreemptedBy string
	// Rejections maps each node that could not start the pod (reported by
	// the orchestrator) to the node's Revision then; RejectedNodes keeps
	// the pod off such a node until its record changes.
	Rejections map[string]int64

	// Set on the assumed copy a binding cycle commits:
	//
	// ViewRevision is the store revision of the cluster view the placement
	// was checked against: every change at or before it was in the cache.
	// A commit must fail if another writer added a pod to the node after it.
	ViewRevision int64
	// Shard is the pod's logical shard and ShardEpoch the revision at which
	// this replica took ownership of it: the fence a commit compares, so a
	// replica that lost the shard cannot commit for it. Epoch 0: no fence.
	Shard      int
	ShardEpoch int64
}

// EditExtras gives p extras of its own to change, copied from those it had
// (which other copies of p may share) or new.
func (p *Pod) EditExtras() *PodExtras {
	e := new(PodExtras)
	if p.Extras != nil {
		*e = *p.Extras
	}
	p.Extras = e
	return e
}

// extras is p's extras, or the zero ones.
func (p *Pod) extras() *PodExtras {
	if p.Extras != nil {
		return p.Extras
	}
	return &noExtras
}

// noExtras is what a Pod without extras reads; never written.
var noExtras PodExtras

// Each accessor below reads one field of p's extras: the zero value when p
// has none.

func (p *Pod) InitContainers() []Container  { return p.extras().InitContainers }
func (p *Pod) Overhead() ResourceList       { return p.extras().Overhead }
func (p *Pod) SchedulingGates() []string    { return p.extras().SchedulingGates }
func (p *Pod) NominatedNodeName() string    { return p.extras().NominatedNodeName }
func (p *Pod) StatusMessage() string        { return p.extras().StatusMessage }
func (p *Pod) PreemptedBy() string          { return p.extras().PreemptedBy }
func (p *Pod) Rejections() map[string]int64 { return p.extras().Rejections }
func (p *Pod) ViewRevision() int64          { return p.extras().ViewRevision }
func (p *Pod) Shard() int                   { return p.extras().Shard }
func (p *Pod) ShardEpoch() int64            { return p.extras().ShardEpoch }

// IsZero reports whether e sets nothing, so that a Pod can do without it.
func (e *PodExtras) IsZero() bool {
	return len(e.InitContainers) == 0 && len(e.Overhead) == 0 && len(e.SchedulingGates) == 0 &&
		e.NominatedNodeName == "" && e.StatusMessage == "" && e.PreemptedBy == "" && len(e.Rejections) == 0 &&
		e.ViewRevision == 0 && e.Shard == 0 && e.ShardEpoch == 0
}
