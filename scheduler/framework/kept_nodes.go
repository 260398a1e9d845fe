package framework

// Plugins that keep per-node results across cycles (PodTopologySpread's
// domain totals, InterPodAffinity's term counts) index them by position in
// the snapshot's node list and correct them from the NodeInfos the
// snapshot's updates overwrote. What they share lives here: finding the
// change log, knowing which list and generation kept state reflects, and
// the positions of a list's NodeInfos.

// NodeChangeLog is a snapshot that can list the NodeInfos its updates
// overwrote since a generation it reported; cache.Snapshot is one.
// NodesChangedSince is false when it cannot tell (the log no longer
// reaches back, or the list was rebuilt since).
type NodeChangeLog interface {
	Generation() int64
	NodesChangedSince(gen int64) ([]*NodeInfo, bool)
}

// ChangeLogFor returns lister's change log when nodes is the lister's own
// node list: only there do the log's NodeInfos have stable positions.
// False for any other lister or list; the caller then counts node by node.
func ChangeLogFor(lister SharedLister, nodes []*NodeInfo) (NodeChangeLog, bool) {
	log, ok := lister.(NodeChangeLog)
	if !ok || len(nodes) == 0 {
		return nil, false
	}
	if all := lister.NodeInfos().List(); len(all) != len(nodes) || &all[0] != &nodes[0] {
		return nil, false
	}
	return log, true
}

// KeptAt records which change log, node list and generation some state
// kept across cycles reflects. A list is told by its first element and
// length: the snapshot reuses its list until it rebuilds it, and a
// rebuilt list restarts the log.
type KeptAt struct {
	log  NodeChangeLog
	list *NodeInfo
	size int
	gen  int64
}

func (k *KeptAt) sameList(log NodeChangeLog, all []*NodeInfo) bool {
	return k.log == log && len(all) > 0 && k.list == all[0] && k.size == len(all)
}

// Current reports whether the state is at generation gen of log over all:
// nothing changed since.
func (k *KeptAt) Current(log NodeChangeLog, all []*NodeInfo, gen int64) bool {
	return k.sameList(log, all) && k.gen == gen
}

// Changed returns the NodeInfos of all that changed since the state's
// generation; false when the state is of another log or list, or the log
// cannot tell, and the state must be rebuilt from every node.
func (k *KeptAt) Changed(log NodeChangeLog, all []*NodeInfo) ([]*NodeInfo, bool) {
	if !k.sameList(log, all) {
		return nil, false
	}
	return log.NodesChangedSince(k.gen)
}

// CatchUp calls renew with the position and NodeInfo of every node of all
// changed since the state's generation, indexing all in positions; false
// when the log cannot list them or one is not in all, and the state must
// be rebuilt from every node.
func (k *KeptAt) CatchUp(log NodeChangeLog, all []*NodeInfo, positions *NodePositions, renew func(pos int, ni *NodeInfo)) bool {
	changed, ok := k.Changed(log, all)
	if !ok || !positions.Index(all) {
		return false
	}
	for _, ni := range changed {
		pos, ok := positions.Of(ni)
		if !ok {
			return false
		}
		renew(pos, ni)
	}
	return true
}

// Mark records that the state now reflects generation gen of log over all.
func (k *KeptAt) Mark(log NodeChangeLog, all []*NodeInfo, gen int64) {
	*k = KeptAt{log: log, list: all[0], size: len(all), gen: gen}
}

// NodePositions maps the NodeInfos of one node list to their positions,
// so that a changed NodeInfo finds its kept state.
type NodePositions struct {
	list *NodeInfo
	size int
	pos  map[*NodeInfo]int32
}

// Index makes p index all, rebuilding it when all is a new list; false if
// all holds a NodeInfo twice, which no position can then stand for.
func (p *NodePositions) Index(all []*NodeInfo) bool {
	if p.pos != nil && p.list == all[0] && p.size == len(all) {
		return true
	}
	pos := make(map[*NodeInfo]int32, len(all))
	for i, ni := range all {
		pos[ni] = int32(i)
	}
	if len(pos) != len(all) {
		*p = NodePositions{}
		return false
	}
	*p = NodePositions{list: all[0], size: len(all), pos: pos}
	return true
}

// Of is ni's position in the list last indexed; false if it is not there.
func (p *NodePositions) Of(ni *NodeInfo) (int, bool) {
	i, ok := p.pos[ni]
	return int(i), ok
}
