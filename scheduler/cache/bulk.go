package cache

import (
	"cmp"
	"context"
	"hash/maphash"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
)

// AddPodInfos is AddPod for many bound pods at once, under one lock, with
// their PodInfos built by the caller (in parallel, at a restart's load):
// each pod must have a node and not be terminal. A pod already cached is
// replaced, as AddPod does.
func (c *Cache) AddPodInfos(pis []*framework.PodInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pods) == 0 && len(pis) >= parallelLoadMin && len(pis) <= math.MaxInt32 && c.loadLocked(pis) {
		return nil
	}
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

// parallelLoadMin is the smallest load into an empty cache that loadLocked
// spreads over the cores; below it the goroutines cost more than they save.
const parallelLoadMin = 4096

// loadPartitions splits a parallel load's nodes among its workers. There are
// more of them than cores so that a worker whose core is busy elsewhere (a
// restart loads beside the etcd open) takes fewer, instead of holding up the
// end with its share.
const loadPartitions = 64

// loadLocked is AddPodInfos into a cache that holds no pod yet, as at a
// restart, where charging a million pods one after another took seconds with
// a core idle. The pod map and the placement log are filled on one core
// while the charges, each NodeInfo's own, run beside them on the others, a
// NodeInfo's pods in their order in pis, so each NodeInfo ends as the serial
// load leaves it. It reports false, having taken every charge back, if pis
// holds a pod twice (no listing does): the serial load's replacements then
// decide the order.
func (c *Cache) loadLocked(pis []*framework.PodInfo) bool {
	par := framework.NewParallelizer(runtime.GOMAXPROCS(0))
	keys := make([]string, len(pis))
	items := make([]*nodeItem, len(pis))
	part := make([]uint8, len(pis))
	seed := maphash.MakeSeed()
	// Reads only: nothing writes c.nodes until this is done.
	par.Until(context.Background(), len(pis), func(i int) {
		name := pis[i].Pod.NodeName
		keys[i], items[i] = pis[i].Pod.Key(), c.nodes[name]
		part[i] = uint8(maphash.String(seed, name) % loadPartitions)
	})
	parts := make([][]int32, loadPartitions)
	for i, pi := range pis {
		if items[i] == nil {
			items[i] = c.item(pi.Pod.NodeName) // a node not known yet
		}
		parts[part[i]] = append(parts[part[i]], int32(i))
	}

	charged := framework.NextGeneration()
	var charging sync.WaitGroup
	charging.Go(func() {
		par.Until(context.Background(), loadPartitions, func(p int) {
			for _, i := range parts[p] {
				items[i].info.AddPodInfo(pis[i])
			}
		})
	})
	distinct := c.fillPodsLocked(pis, keys, items)
	charging.Wait()
	changed := c.chargedSince(charged)
	if !distinct {
		// The serial load that follows charges them again, and moves them.
		for _, it := range changed {
			uncharge(it.info)
		}
		return false
	}
	// The recency list must run from the newest generation down: move the
	// NodeInfos charged above to its head, oldest charge first.
	slices.SortFunc(changed, func(a, b *nodeItem) int { return cmp.Compare(a.info.Generation, b.info.Generation) })
	for _, it := range changed {
		c.moveToHead(it)
	}
	c.parallelLoads++
	return true
}

// fillPodsLocked enters pis in the pod map and the placement log, as the
// serial load does, unless it meets a key twice: then it leaves both as it
// found them (empty, and the count unmoved) and reports false.
func (c *Cache) fillPodsLocked(pis []*framework.PodInfo, keys []string, items []*nodeItem) (distinct bool) {
	c.pods = make(map[string]*podState, len(pis))
	// The run ends only once every pod is in: until then the count does
	// not move, and no reader looks at the ring slots past it.
	placed := c.placed.startRun()
	for i, pi := range pis {
		n := len(c.pods)
		c.pods[keys[i]] = &podState{info: pi, item: items[i]}
		if len(c.pods) == n {
			c.pods = make(map[string]*podState)
			return false
		}
		placed.record(pi)
	}
	placed.end()
	return true
}

// chargedSince returns the NodeInfos whose generation passed gen.
func (c *Cache) chargedSince(gen int64) []*nodeItem {
	var out []*nodeItem
	for _, it := range c.nodes {
		if it.info.Generation > gen {
			out = append(out, it)
		}
	}
	return out
}

// uncharge takes back every pod of a NodeInfo that held none before the
// load, newest first (each removal then finds its pod at the end, so none
// can fail).
func uncharge(ni *framework.NodeInfo) {
	for range len(ni.Pods) {
		if ni.RemovePod(ni.Pods[len(ni.Pods)-1].Pod) != nil {
			return
		}
	}
}
