package podtopologyspread

import (
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
)

// domainIndexes remember, per topology key, which domain each node of the
// snapshot belongs to, so PreFilter adds counts up by slice index instead
// of hashing two strings per node per constraint. A node's entry is
// recomputed only when its generation (or its place in the list) changes.
type domainIndexes struct {
	mu    sync.Mutex
	byKey map[string]*domainIndex
}

type domainIndex struct {
	gens    []int64
	names   []string
	ids     []int32 // per node; -1: the node lacks the key
	values  []string
	byValue map[string]int32
}

// lookup returns, for each node, its domain id under key (-1 if it lacks
// the key), and the domain values by id. The slices are valid until the
// next call; callers hold no reference across cycles.
func (d *domainIndexes) lookup(key string, nodes []*framework.NodeInfo) (ids []int32, values []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKey == nil {
		d.byKey = map[string]*domainIndex{}
	}
	idx := d.byKey[key]
	// Values only accumulate; start over once stale ones dominate.
	if idx == nil || len(idx.gens) != len(nodes) || len(idx.values) > 2*len(nodes)+16 {
		idx = &domainIndex{
			gens: make([]int64, len(nodes)), names: make([]string, len(nodes)),
			ids: make([]int32, len(nodes)), byValue: map[string]int32{},
		}
		for n := range idx.gens {
			idx.gens[n] = -1
		}
		d.byKey[key] = idx
	}
	for n, ni := range nodes {
		node := ni.Node()
		if node == nil {
			idx.gens[n], idx.names[n], idx.ids[n] = -1, "", -1
			continue
		}
		if idx.gens[n] == ni.Generation && idx.names[n] == node.Name {
			continue
		}
		idx.gens[n], idx.names[n] = ni.Generation, node.Name
		v, ok := node.Labels[key]
		if !ok {
			idx.ids[n] = -1
			continue
		}
		id, ok := idx.byValue[v]
		if !ok {
			id = int32(len(idx.values))
			idx.values = append(idx.values, v)
			idx.byValue[v] = id
		}
		idx.ids[n] = id
	}
	return idx.ids, idx.values
}
