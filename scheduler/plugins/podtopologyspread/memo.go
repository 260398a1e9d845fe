package podtopologyspread

import (
	"strconv"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
)

// maxMemos bounds how many selectors the plugin remembers counts for:
// enough for a few workloads interleaving in the queue.
const maxMemos = 4

// countMemos remembers, across cycles, how many pods of a (selector,
// namespace) each node held. Counting every pod of the cluster is most of
// this plugin's cost, and pods of one workload arrive in bursts: between
// two of their cycles only the few nodes that gained or lost a pod change,
// so the rest are answered from the memo. A NodeInfo's pods change only
// with its Generation (a process-wide counter), so an entry is valid while
// both the NodeInfo pointer and its Generation are the same.
//
// A plugin instance belongs to one framework, whose scheduling cycles run
// one at a time; mu (taken with TryLock) only keeps an unexpected
// concurrent cycle from sharing the memos: it counts without them.
type countMemos struct {
	mu    sync.Mutex
	memos [maxMemos]countMemo
	tick  uint64
}

// countMemo holds one (selector, namespace)'s count per node position in
// the snapshot's node list. Positions are reused only after checking the
// pointer, so a reordered list costs recounts, never wrong answers.
type countMemo struct {
	key     string
	lastUse uint64
	entries []memoEntry
}

type memoEntry struct {
	node  *framework.NodeInfo
	gen   int64
	count int32
}

// acquire returns the memos for one cycle, or nil if another cycle holds
// them; release must follow.
func (m *countMemos) acquire() *countMemos {
	if !m.mu.TryLock() {
		return nil
	}
	m.tick++
	return m
}

func (m *countMemos) release() { m.mu.Unlock() }

// forSelector returns the memo of sel in namespace ns sized for numNodes,
// taking over the least recently used one if sel is new. It returns nil
// when counting needs no memo (nil and empty selectors count 0) or when
// every memo is already in use this cycle.
func (m *countMemos) forSelector(sel *selector, ns string, numNodes int) *countMemo {
	if m == nil || sel.nothing || sel.empty() {
		return nil
	}
	key := sel.signature(ns)
	var victim *countMemo
	for i := range m.memos {
		c := &m.memos[i]
		if c.key == key && c.entries != nil {
			c.lastUse = m.tick
			c.resize(numNodes)
			return c
		}
		if c.lastUse < m.tick && (victim == nil || c.lastUse < victim.lastUse) {
			victim = c
		}
	}
	if victim == nil {
		return nil
	}
	victim.key, victim.lastUse = key, m.tick
	clear(victim.entries)
	victim.resize(numNodes)
	return victim
}

func (c *countMemo) resize(n int) {
	if cap(c.entries) < n {
		c.entries = make([]memoEntry, n)
	}
	c.entries = c.entries[:n]
}

// count returns the pods of ni (at position pos) that sel selects in ns,
// from the memo when ni has not changed. c may be nil. Different
// positions may be counted concurrently.
func (c *countMemo) count(pos int, ni *framework.NodeInfo, sel *selector, ns string) int {
	if c == nil {
		return countMatching(ni.Pods, sel, ns)
	}
	e := &c.entries[pos]
	if e.node == ni && e.gen == ni.Generation {
		return int(e.count)
	}
	n := countMatching(ni.Pods, sel, ns)
	*e = memoEntry{node: ni, gen: ni.Generation, count: int32(n)}
	return n
}

// signature identifies what a selector selects in a namespace; compiled
// selectors of equal signature count the same pods. Every string is
// length-prefixed, so no label content can forge another signature.
func (s *selector) signature(ns string) string {
	b := make([]byte, 0, 64)
	b = appendField(b, ns)
	for i := range s.reqs {
		r := &s.reqs[i]
		b = appendField(b, r.key)
		b = appendField(b, string(r.op))
		b = strconv.AppendInt(b, int64(len(r.values)), 10)
		b = append(b, '|')
		for _, v := range r.values {
			b = appendField(b, v)
		}
	}
	return string(b)
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
