package queue

import "github.com/berth-io/berth/scheduler/framework"

// strategy is where an event sends an unschedulable pod; larger is sooner.
type strategy uint8

const (
	strategySkip strategy = iota
	strategyAfterBackoff
	strategyImmediately
)

// isInteresting reports whether any plugin registered an event matching e;
// others cannot move any pod (wildcard events move all).
func (q *PriorityQueue) isInteresting(e framework.ClusterEvent) bool {
	if e.Resource == framework.EventResourceWildcard {
		return true
	}
	for _, reg := range q.interesting {
		if reg.Match(e) {
			return true
		}
	}
	return false
}

// worth decides what event e (oldObj -> newObj) means for a rejected pod,
// following kube-scheduler: a pod with no rejecting plugin is retried after
// backoff; a wildcard event retries everything after backoff; otherwise
// each rejecting plugin's matching registrations are asked, and a Queue
// from a plugin that returned Pending retries at once, from one that
// returned Unschedulable after backoff.
func (q *PriorityQueue) worth(qpi *framework.QueuedPodInfo, e framework.ClusterEvent, oldObj, newObj any) strategy {
	if len(qpi.UnschedulablePlugins) == 0 && len(qpi.PendingPlugins) == 0 {
		return strategyAfterBackoff
	}
	if e.Resource == framework.EventResourceWildcard {
		return strategyAfterBackoff
	}
	for plugin := range qpi.PendingPlugins {
		if q.pluginSaysQueue(plugin, qpi.Pod, e, oldObj, newObj) {
			return strategyImmediately
		}
	}
	for plugin := range qpi.UnschedulablePlugins {
		if _, pending := qpi.PendingPlugins[plugin]; pending {
			continue // already asked
		}
		if q.pluginSaysQueue(plugin, qpi.Pod, e, oldObj, newObj) {
			return strategyAfterBackoff
		}
	}
	return strategySkip
}

// pluginSaysQueue asks plugin's registrations matching e. A nil hint means
// Queue; so does a hint error, so a buggy hint cannot strand a pod.
func (q *PriorityQueue) pluginSaysQueue(plugin string, p *framework.Pod, e framework.ClusterEvent, oldObj, newObj any) bool {
	for _, reg := range q.opts.hints[plugin] {
		if !reg.Event.Match(e) {
			continue
		}
		if reg.QueueingHintFn == nil {
			return true
		}
		hint, err := reg.QueueingHintFn(p, oldObj, newObj)
		if err != nil || hint == framework.Queue {
			return true
		}
	}
	return false
}
