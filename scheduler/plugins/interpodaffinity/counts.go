package interpodaffinity

import (
	"maps"

	"github.com/berth-io/berth/scheduler/framework"
)

// domainCounts counts matches per topology domain, grouped by topology
// key: Filter looks up a node's domain for every node it visits, and a
// lookup then hashes only the value, on Go's fast path for string keys,
// instead of a key and value pair. A count that falls to zero is deleted.
// The zero value counts nothing.
type domainCounts []keyCounts

// keyCounts are the counts of the domains of one topology key.
type keyCounts struct {
	key    string
	values map[string]int64
}

// of returns the counts of key's domains; nil if it has none.
func (d domainCounts) of(key string) map[string]int64 {
	for i := range d {
		if d[i].key == key {
			return d[i].values
		}
	}
	return nil
}

// add adds delta to the domain key=value.
func (d *domainCounts) add(key, value string, delta int64) {
	m := d.of(key)
	if m == nil {
		m = map[string]int64{}
		*d = append(*d, keyCounts{key: key, values: m})
	}
	if n := m[value] + delta; n != 0 {
		m[value] = n
	} else {
		delete(m, value)
	}
}

// addAll adds every count of o.
func (d *domainCounts) addAll(o domainCounts) {
	for _, k := range o {
		for v, n := range k.values {
			d.add(k.key, v, n)
		}
	}
}

// domains returns how many domains hold a count.
func (d domainCounts) domains() int {
	n := 0
	for i := range d {
		n += len(d[i].values)
	}
	return n
}

func (d domainCounts) clone() domainCounts {
	if d == nil {
		return nil
	}
	out := make(domainCounts, len(d))
	for i := range d {
		out[i] = keyCounts{key: d[i].key, values: maps.Clone(d[i].values)}
	}
	return out
}

// mergeCounts sums per-chunk counts; with one chunk (the inline case) it
// returns that chunk's counts as they are.
func mergeCounts(parts []domainCounts) domainCounts {
	var out domainCounts
	for i, part := range parts {
		if i == 0 {
			out = part
			continue
		}
		out.addAll(part)
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
	base    domainCounts
	changes domainCounts
	// nonzero counts the domains whose total is not zero.
	nonzero int
}

// layered makes d the base of new counts; d must not be written after.
func layered(d domainCounts) layeredCounts {
	return layeredCounts{base: d, nonzero: d.domains()}
}

// get returns the count of the domain key=value.
func (c *layeredCounts) get(key, value string) int64 {
	n := c.base.of(key)[value]
	if len(c.changes) > 0 {
		n += c.changes.of(key)[value]
	}
	return n
}

// empty reports whether no domain counts anything.
func (c *layeredCounts) empty() bool { return c.nonzero == 0 }

// add adds delta to the count of the domain key=value.
func (c *layeredCounts) add(key, value string, delta int64) {
	before := c.get(key, value)
	c.changes.add(key, value, delta)
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
		c.add(key, value, delta)
	}
}

// copy returns counts equal to c that share its base.
func (c *layeredCounts) copy() layeredCounts {
	return layeredCounts{base: c.base, changes: c.changes.clone(), nonzero: c.nonzero}
}

// settle folds the changes into a new base once they pass a share of it,
// so that copies stay cheap: a copy costs the changes, a fold the whole
// base, and the share puts a fold about every len(base)/foldShare changed
// domains.
func (c *layeredCounts) settle() {
	if c.changes.domains() <= max(foldMin, c.base.domains()/foldShare) {
		return
	}
	if len(c.base) == 0 {
		// No copy shares the changes, and they hold no zero count.
		c.base, c.changes = c.changes, nil
		return
	}
	base := c.base.clone()
	base.addAll(c.changes)
	c.base, c.changes = base, nil
}

const (
	foldMin   = 32
	foldShare = 64
)

// topologyPair is one topology domain: a node label and its value.
type topologyPair struct {
	key, value string
}

// totals returns the counts as one map, without zeros (for tests and
// messages).
func (c *layeredCounts) totals() map[topologyPair]int64 {
	sum := c.base.clone()
	sum.addAll(c.changes)
	out := map[topologyPair]int64{}
	for _, k := range sum {
		for v, n := range k.values {
			out[topologyPair{key: k.key, value: v}] = n
		}
	}
	return out
}
