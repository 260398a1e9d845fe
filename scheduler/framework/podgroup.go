package framework

import "time"

// EventResourcePodGroup is the resource of pod group events: a group's
// creation or change can release members gated or rejected for its sake.
const EventResourcePodGroup EventResource = "PodGroup"

// PodGroup is a gang: pods that name it in PodGroup are bound together,
// once MinMember of them fit, or not at all.
type PodGroup struct {
	Namespace string
	Name      string
	// MinMember is how many members must be placed before any is bound.
	MinMember int32
	// ScheduleTimeout is how long placed members wait at Permit for the
	// rest before all of them are released.
	ScheduleTimeout time.Duration
}

// Key is the group's namespace/name.
func (g *PodGroup) Key() string { return g.Namespace + "/" + g.Name }

// PodGroupKey is the key of the group a pod belongs to, or "" if none.
func PodGroupKey(p *Pod) string {
	if p.PodGroup == "" {
		return ""
	}
	return p.Namespace + "/" + p.PodGroup
}

// PodGroupLister is the core's view of pod groups, for gang scheduling.
// Every method is safe for concurrent use.
type PodGroupLister interface {
	// Get returns the group namespace/name, or false if it does not exist.
	Get(namespace, name string) (*PodGroup, bool)
	// Members counts the group's stored pods that are not finished (live)
	// and those of them bound to a node.
	Members(namespace, name string) (live, bound int)
	// Subscribe registers fn to be called (never under a lock the caller
	// of Get or Members holds) when a group is created, changed or deleted,
	// or when one of its members is bound: waiting members may be released
	// then.
	Subscribe(fn func(namespace, name string))
}

// GangCommitter gathers the members of a gang released together so their
// bindings are committed in one transaction.
type GangCommitter interface {
	// BindTogether declares that pods, released together at Permit, must
	// be bound in one commit or not at all. Call it before releasing them.
	BindTogether(pods []*Pod)
	// Hold records that a member is waiting on its node for the rest of
	// its gang; Release ends that, when the member is rejected or gives up.
	Hold(pod *Pod)
	Release(pod *Pod)
}
