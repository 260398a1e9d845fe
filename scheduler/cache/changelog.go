package cache

import "github.com/berth-io/berth/scheduler/framework"

// maxChangeLog bounds the NodeInfos a snapshot remembers as changed: a
// plugin that keeps cluster-wide counts across cycles (topology spread)
// catches up from the log while it covers the cycles since its last look,
// and recounts otherwise. A few thousand covers many cycles of a busy
// shard at 16 bytes each.
const maxChangeLog = 8192

// Plugins find the log through this interface; without it they would
// silently count every node each cycle.
var _ framework.NodeChangeLog = (*Snapshot)(nil)

// changeLog lists the snapshot NodeInfos each update overwrote, oldest
// update first, each with the Generation it was overwritten with.
type changeLog struct {
	nodes []*framework.NodeInfo
	gens  []int64
	// floor is the oldest snapshot generation the log can answer for:
	// earlier entries were dropped, or the node list was rebuilt (moving
	// every NodeInfo) after it.
	floor int64
}

func (l *changeLog) record(ni *framework.NodeInfo) {
	l.nodes = append(l.nodes, ni)
	l.gens = append(l.gens, ni.Generation)
}

// trim drops the older half once the log is over its bound. An update's
// entries all lie above the generation before it, so the floor becomes
// the newest generation dropped.
func (l *changeLog) trim() {
	if len(l.nodes) <= maxChangeLog {
		return
	}
	drop := len(l.nodes) - maxChangeLog/2
	for _, g := range l.gens[:drop] {
		l.floor = max(l.floor, g)
	}
	kept := copy(l.nodes, l.nodes[drop:])
	// The moved entries' old places would otherwise keep NodeInfos the
	// snapshot has dropped alive: after a first update of 100,000 nodes,
	// whose list rebuild copies every NodeInfo, that was 30 MB a shard.
	clear(l.nodes[kept:])
	l.nodes = l.nodes[:kept]
	l.gens = append(l.gens[:0], l.gens[drop:]...)
}

// restart forgets every entry: NodeInfos moved, so only callers that look
// at generation gen or later may use the log.
func (l *changeLog) restart(gen int64) {
	clear(l.nodes)
	l.nodes, l.gens, l.floor = l.nodes[:0], l.gens[:0], gen
}

// NodesChangedSince returns the snapshot's NodeInfos overwritten by the
// updates that followed the one which left the snapshot at generation gen
// (a value Generation returned), possibly more than once each; ok is false
// when the log no longer reaches back to gen, or the node list was rebuilt
// since, and the caller must look at every node. The slice is the
// snapshot's: read it before the next update, do not modify it.
func (s *Snapshot) NodesChangedSince(gen int64) (changed []*framework.NodeInfo, ok bool) {
	l := &s.changes
	// Generation 0 is a snapshot built by NewSnapshot, whose NodeInfos
	// tests may change behind its back.
	if s.generation == 0 || gen < l.floor || gen > s.generation {
		return nil, false
	}
	// Updates append in generation order and gen is an update's boundary,
	// so the entries past gen are a suffix.
	i := len(l.gens)
	for i > 0 && l.gens[i-1] > gen {
		i--
	}
	return l.nodes[i:], true
}
