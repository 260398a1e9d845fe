// Package coscheduling schedules pod groups (gangs) all or nothing. Members
// are placed one at a time and held at Permit until min_member of them are
// (counting members already bound); then all are released together, to be
// bound in one commit. If the rest do not come within the group's
// schedule_timeout, or one member fails, every waiting member is released
// and each backs off.
//
// Pods without a pod group pass every extension point at the cost of one
// string comparison.
package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.Coscheduling

// Coscheduling implements gang scheduling at PreEnqueue, PreFilter,
// Reserve (for Unreserve) and Permit.
type Coscheduling struct {
	h      framework.Handle
	groups framework.PodGroupLister
	gangs  framework.GangCommitter

	// mu serialises the decisions over a group's waiting members (Permit,
	// Unreserve, and the re-judging of a group when it changes), so a
	// member is never released and rejected at once.
	mu sync.Mutex
}

var (
	_ framework.PreEnqueuePlugin  = (*Coscheduling)(nil)
	_ framework.PreFilterPlugin   = (*Coscheduling)(nil)
	_ framework.ReservePlugin     = (*Coscheduling)(nil)
	_ framework.PermitPlugin      = (*Coscheduling)(nil)
	_ framework.EnqueueExtensions = (*Coscheduling)(nil)
)

// New builds the plugin. It takes no args: the pod groups and the gang
// commits are the scheduler's, reached through h, which may be nil (PodGroups: nil means no
// group is known, so every pod that names one is held back;
// GangCommitter: nil means nothing is gathered).
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: takes no args, got %T", Name, args)
	}
	c := &Coscheduling{h: h}
	if h != nil {
		c.groups, c.gangs = h.PodGroups(), h.GangCommitter()
	}
	if c.gangs == nil {
		c.gangs = nopGangs{}
	}
	if c.groups != nil {
		c.groups.Subscribe(c.regroup)
	}
	return c, nil
}

// Name implements framework.Plugin.
func (*Coscheduling) Name() string { return Name }

func (c *Coscheduling) group(p *framework.Pod) (*framework.PodGroup, *framework.Status) {
	if c.groups != nil {
		if g, ok := c.groups.Get(p.Namespace, p.PodGroup); ok {
			return g, nil
		}
	}
	// The shard records this message as the parked pod's status, so it is
	// worded for whoever reads GetPod.
	return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("waiting for pod group %q, which does not exist", p.PodGroup))
}

// PreEnqueue implements framework.PreEnqueuePlugin: a member of a group
// that does not exist waits, gated, until the group is created.
func (c *Coscheduling) PreEnqueue(_ context.Context, p *framework.Pod) *framework.Status {
	if p.PodGroup == "" {
		return nil
	}
	_, st := c.group(p)
	return st
}

// PreFilter implements framework.PreFilterPlugin: a gang with fewer
// members than min_member cannot be placed, however much room there is.
func (c *Coscheduling) PreFilter(_ context.Context, _ *framework.CycleState, pi *framework.PodInfo, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	p := pi.Pod
	if p.PodGroup == "" {
		return nil, nil
	}
	g, st := c.group(p)
	if st != nil {
		return nil, st
	}
	if live, _ := c.groups.Members(p.Namespace, p.PodGroup); live < int(g.MinMember) {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
			fmt.Sprintf("pod group %s has %d of the %d members it needs", g.Key(), live, g.MinMember))
	}
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin; the plugin's
// verdict does not depend on the pods of a node.
func (*Coscheduling) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Reserve implements framework.ReservePlugin; only Unreserve matters.
func (*Coscheduling) Reserve(context.Context, *framework.CycleState, *framework.Pod, string) *framework.Status {
	return nil
}

// Unreserve implements framework.ReservePlugin: one member failing (a
// timeout, a rejection, a failed commit) releases every member of its
// group waiting at Permit, so none holds room for a gang that is not
// coming together; each goes to backoff.
func (c *Coscheduling) Unreserve(_ context.Context, _ *framework.CycleState, p *framework.Pod, _ string) {
	if p.PodGroup == "" {
		return
	}
	c.gangs.Release(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := fmt.Sprintf("member %s of pod group %s/%s was released", p.Name, p.Namespace, p.PodGroup)
	for _, w := range c.waitingLocked(p.Namespace, p.PodGroup) {
		w.Reject(Name, msg)
	}
}

// Permit implements framework.PermitPlugin: the member that brings the
// group to min_member (bound members count, members being bound do not)
// releases itself and every waiting member together; any other waits.
func (c *Coscheduling) Permit(_ context.Context, _ *framework.CycleState, p *framework.Pod, _ string) (*framework.Status, time.Duration) {
	if p.PodGroup == "" {
		return nil, 0
	}
	g, st := c.group(p)
	if st != nil {
		return st, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	waiting := c.waitingLocked(p.Namespace, p.PodGroup)
	_, bound := c.groups.Members(p.Namespace, p.PodGroup)
	if bound+len(waiting)+1 >= int(g.MinMember) {
		c.releaseLocked(waiting, p)
		return nil, 0
	}
	c.gangs.Hold(p)
	return framework.NewStatus(framework.Wait, fmt.Sprintf("waiting for %d more members of pod group %s",
		int(g.MinMember)-bound-len(waiting)-1, g.Key())), g.ScheduleTimeout
}

// regroup judges a group's waiting members again after the group or its
// members changed: enough bound members release them, a deleted group
// rejects them.
func (c *Coscheduling) regroup(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	waiting := c.waitingLocked(namespace, name)
	if len(waiting) == 0 {
		return
	}
	g, ok := c.groups.Get(namespace, name)
	if !ok {
		for _, w := range waiting {
			w.Reject(Name, fmt.Sprintf("pod group %s/%s was deleted", namespace, name))
		}
		return
	}
	if _, bound := c.groups.Members(namespace, name); bound+len(waiting) >= int(g.MinMember) {
		c.releaseLocked(waiting, nil)
	}
}

// waitingLocked lists the group's members held at Permit that this plugin
// has not released yet.
func (c *Coscheduling) waitingLocked(namespace, name string) []framework.WaitingPod {
	var out []framework.WaitingPod
	c.h.IterateOverWaitingPods(func(w framework.WaitingPod) {
		p := w.GetPod()
		if p.PodGroup != name || p.Namespace != namespace {
			return
		}
		for _, pl := range w.GetPendingPlugins() {
			if pl == Name {
				out = append(out, w)
				return
			}
		}
	})
	return out
}

// releaseLocked declares the members one gang commit before letting any
// of them go, so none can reach its binding alone.
func (c *Coscheduling) releaseLocked(waiting []framework.WaitingPod, self *framework.Pod) {
	pods := make([]*framework.Pod, 0, len(waiting)+1)
	for _, w := range waiting {
		pods = append(pods, w.GetPod())
	}
	if self != nil {
		pods = append(pods, self)
	}
	c.gangs.BindTogether(pods)
	for _, w := range waiting {
		// A timeout or a failed assumption write rejects without c.mu: a
		// member rejected after it was listed, whose Release may have come
		// before its gang was declared, fails the gang here. One rejected
		// later finds the gang declared when its own Release comes.
		if !slices.Contains(w.GetPendingPlugins(), Name) {
			c.gangs.Release(w.GetPod())
		}
		w.Allow(Name)
	}
}

// EventsToRegister implements framework.EnqueueExtensions: a new member
// of the pod's group can bring it to min_member; the group's creation or
// change can lift a gate or lower min_member.
func (*Coscheduling) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionAdd}, QueueingHintFn: isSiblingAdded},
		{Event: framework.ClusterEvent{Resource: framework.EventResourcePodGroup, ActionType: framework.ActionAdd | framework.ActionUpdate}, QueueingHintFn: isOwnGroup},
	}, nil
}

func isSiblingAdded(p *framework.Pod, _, newObj any) (framework.QueueingHint, error) {
	q, ok := newObj.(*framework.Pod)
	if !ok || q == nil || p.PodGroup == "" || q.PodGroup != p.PodGroup || q.Namespace != p.Namespace {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

func isOwnGroup(p *framework.Pod, _, newObj any) (framework.QueueingHint, error) {
	g, ok := newObj.(*framework.PodGroup)
	if !ok || g == nil || g.Name != p.PodGroup || g.Namespace != p.Namespace {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

// nopGangs stands in when the plugin runs without a core (tests, dry runs).
type nopGangs struct{}

func (nopGangs) BindTogether([]*framework.Pod) {}
func (nopGangs) Hold(*framework.Pod)           {}
func (nopGangs) Release(*framework.Pod)        {}

var _ framework.SignPlugin = (*Coscheduling)(nil)

// AppendSignature implements framework.SignPlugin: the plugin's PreFilter
// admits or turns away the whole pod and it has no Filter or Score, so it
// adds nothing a node's results depend on.
func (*Coscheduling) AppendSignature(sig []byte, _ *framework.PodInfo) ([]byte, bool) {
	return sig, true
}
