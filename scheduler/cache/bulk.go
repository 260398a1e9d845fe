package cache

import "github.com/berth-io/berth/scheduler/framework"

// AddPodInfos is AddPod for many bound pods at once, under one lock, with
// their PodInfos built by the caller (in parallel, at a restart's load):
// each pod must have a node and not be terminal. A pod already cached is
// replaced, as AddPod does.
func (c *Cache) AddPodInfos(pis []*framework.PodInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pods) == 0 && len(pis) > 0 {
		// Sized once: growing to a restart's pods a doubling at a time
		// rehashed each of them about twice.
		c.pods = make(map[string]*podState, len(pis))
	}
	var firstErr error
	placed := c.placed.startRun()
	defer placed.end()
	for _, pi := range pis {
		key := pi.Pod.Key()
		ps, ok := c.pods[key]
		if ok {
			if err := c.removePodLocked(key, ps); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
		}
		c.addPodKeyLocked(pi, key, false, c.item(pi.Pod.NodeName))
		if !ok || ps.info.Pod.NodeName != pi.Pod.NodeName {
			placed.record(pi)
		}
	}
	return firstErr
}
