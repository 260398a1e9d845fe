package interpodaffinity

import (
	"maps"

	"github.com/berth-io/berth/scheduler/framework"
)

// topologyPair is one topology domain: a node label and its value.
type topologyPair struct {
	key, value string
}

// topologyCounts counts matches per domain. A count that falls to zero is
// deleted, so an empty map means no match anywhere.
type topologyCounts map[topologyPair]int64

// inc counts one more match in p, making the map if needed.
func (m *topologyCounts) inc(p topologyPair) {
	if *m == nil {
		*m = topologyCounts{}
	}
	(*m)[p]++
}

// addPair adds delta to p, deleting a count that reaches zero.
func addPair(m topologyCounts, p topologyPair, delta int64) {
	if n := m[p] + delta; n != 0 {
		m[p] = n
	} else {
		delete(m, p)
	}
}

// mergeCounts sums per-chunk counts; with one chunk (the inline case) it
// returns that chunk's map as is. The result is never nil.
func mergeCounts(parts []topologyCounts) topologyCounts {
	var out topologyCounts
	for _, part := range parts {
		if out == nil {
			out = part
			continue
		}
		for p, n := range part {
			out[p] += n
		}
	}
	if out == nil {
		out = topologyCounts{}
	}
	return out
}

// layeredCounts are counts per domain held as a base, which nothing writes
// once it is one and every copy shares, and the changes made since, which
// each copy owns. Copies are frequent (the kept counts go to each cycle's
// state, and a state is copied for each re-check of a placement), and with
// a domain per node (a hostname key) copying whole maps was a fifth of an
// anti-affinity workload's CPU; a copy here copies only the changes. The
// zero value counts nothing.
type layeredCounts struct {
	base    topologyCounts
	changes topologyCounts
	// nonzero counts the domains whose total is not zero.
	nonzero int
}

// layered makes m the base of new counts; m must not be written after.
func layered(m topologyCounts) layeredCounts {
	return layeredCounts{base: m, nonzero: len(m)}
}

func (c *layeredCounts) get(p topologyPair) int64 {
	n := c.base[p]
	if len(c.changes) > 0 {
		n += c.changes[p]
	}
	return n
}

// empty reports whether no domain counts anything.
func (c *layeredCounts) empty() bool { return c.nonzero == 0 }

// add adds delta to the count of p.
func (c *layeredCounts) add(p topologyPair, delta int64) {
	before := c.get(p)
	if c.changes == nil {
		c.changes = topologyCounts{}
	}
	addPair(c.changes, p, delta)
	switch after := before + delta; {
	case before == 0 && after != 0:
		c.nonzero++
	case before != 0 && after == 0:
		c.nonzero--
	}
}

// addOnNode adds delta to the domain of node under key; nodes without the
// key belong to no domain.
func (c *layeredCounts) addOnNode(node *framework.Node, key string, delta int64) {
	if value, ok := node.Labels[key]; ok {
		c.add(topologyPair{key: key, value: value}, delta)
	}
}

// copy returns counts equal to c that share its base.
func (c *layeredCounts) copy() layeredCounts {
	return layeredCounts{base: c.base, changes: maps.Clone(c.changes), nonzero: c.nonzero}
}

// settle folds the changes into a new base once they pass a share of it,
// so that copies stay cheap: a copy costs the changes, a fold the whole
// base, and the share puts a fold about every len(base)/foldShare changed
// domains.
func (c *layeredCounts) settle() {
	if len(c.changes) <= max(foldMin, len(c.base)/foldShare) {
		return
	}
	if len(c.base) == 0 {
		// No copy shares the changes, and they hold no zero count.
		c.base, c.changes = c.changes, nil
		return
	}
	base := maps.Clone(c.base)
	for p, n := range c.changes {
		addPair(base, p, n)
	}
	c.base, c.changes = base, nil
}

const (
	foldMin   = 32
	foldShare = 64
)

// totals returns the counts as one map, without zeros.
func (c *layeredCounts) totals() topologyCounts {
	out := maps.Clone(c.base)
	if out == nil {
		out = topologyCounts{}
	}
	for p, n := range c.changes {
		addPair(out, p, n)
	}
	return out
}
