package cache

import (
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
)

// Snapshot is one shard loop's private, point-in-time copy of the cache,
// refreshed by Cache.UpdateSnapshot at the start of each cycle. Only its
// owner reads it, so it has no lock.
//
// List order: nodes grouped by zone (topology.kubernetes.io/region and
// zone labels), zones interleaved, insertion order within a zone, as
// kube-scheduler's node tree orders them. The order is stable between
// updates that add or remove no node.
type Snapshot struct {
	nodeInfoMap  map[string]*framework.NodeInfo
	nodeInfoList []*framework.NodeInfo
	// havePodsWithAffinity and havePodsWithRequiredAntiAffinity are the
	// nodes inter-pod affinity must look at.
	havePodsWithAffinity             []*framework.NodeInfo
	havePodsWithRequiredAntiAffinity []*framework.NodeInfo
	generation                       int64
	// treeVersion is the cache node tree's version nodeInfoList follows.
	treeVersion uint64
	// cloned counts NodeInfos copied by UpdateSnapshot, for tests.
	cloned int
	// changes lists the NodeInfos recent updates overwrote (changelog.go).
	changes changeLog
}

var (
	_ framework.SharedLister   = (*Snapshot)(nil)
	_ framework.NodeInfoLister = (*Snapshot)(nil)
)

// NewEmptySnapshot returns a snapshot for UpdateSnapshot to fill.
func NewEmptySnapshot() *Snapshot {
	return &Snapshot{nodeInfoMap: map[string]*framework.NodeInfo{}}
}

// NewSnapshot builds a snapshot directly from objects, for tests: pods are
// charged to the node they name (pods naming no given node are ignored),
// image states are counted over the given nodes, and List keeps the order of
// nodes. Its generation is 0, so UpdateSnapshot would refresh it fully.
func NewSnapshot(pods []*framework.Pod, nodes []*framework.Node) *Snapshot {
	s := NewEmptySnapshot()
	images := map[string]*framework.ImageStateSummary{}
	s.nodeInfoList = make([]*framework.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		for _, img := range n.Images {
			for _, name := range img.Names {
				if _, dup := ni.ImageStates[name]; dup {
					continue
				}
				st, ok := images[name]
				if !ok {
					st = &framework.ImageStateSummary{Size: img.SizeBytes}
					images[name] = st
				}
				st.NumNodes++
				ni.ImageStates[name] = st
			}
		}
		s.nodeInfoMap[n.Name] = ni
		s.nodeInfoList = append(s.nodeInfoList, ni)
	}
	// Give each node its own copy of the image states, as the cache does.
	for _, ni := range s.nodeInfoList {
		for name, st := range ni.ImageStates {
			c := *st
			ni.ImageStates[name] = &c
		}
	}
	for _, p := range pods {
		if ni, ok := s.nodeInfoMap[p.NodeName]; ok && p.NodeName != "" && !p.Phase.Terminal() {
			ni.AddPodInfo(framework.NewPodInfo(p))
		}
	}
	s.rebuildAffinityLists()
	return s
}

// NodeInfos returns the snapshot itself as the node lister.
func (s *Snapshot) NodeInfos() framework.NodeInfoLister { return s }

// List returns every node in the snapshot, in the order described on
// Snapshot. The caller must not modify the slice.
func (s *Snapshot) List() []*framework.NodeInfo { return s.nodeInfoList }

// HavePodsWithAffinityList returns the nodes running a pod with any
// inter-pod affinity or anti-affinity term.
func (s *Snapshot) HavePodsWithAffinityList() []*framework.NodeInfo {
	return s.havePodsWithAffinity
}

// HavePodsWithRequiredAntiAffinityList returns the nodes running a pod with
// required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() []*framework.NodeInfo {
	return s.havePodsWithRequiredAntiAffinity
}

// Get returns the named node; the error wraps ErrNodeNotFound.
func (s *Snapshot) Get(name string) (*framework.NodeInfo, error) {
	if ni, ok := s.nodeInfoMap[name]; ok && ni.Node() != nil {
		return ni, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, name)
}

// Generation is the newest cache change the snapshot reflects.
func (s *Snapshot) Generation() int64 { return s.generation }

// NumNodes returns how many nodes the snapshot holds.
func (s *Snapshot) NumNodes() int { return len(s.nodeInfoList) }

// rebuildLists orders the nodes by names (the cache's node tree order) and
// recomputes the affinity sublists. Lists are allocated afresh: a previous
// cycle may still hold the old ones.
//
// The NodeInfos move into one array in list order. A filter pass walks the
// list from some index on and reads a little of every NodeInfo; scattered
// on the heap, each node was a cache miss, while laid out in walk order the
// hardware prefetcher fetches them ahead of the walk. Updates copy into
// these structs in place, so they stay where they are until the next
// rebuild; whoever still holds a moved-out NodeInfo keeps a valid, frozen
// copy.
func (s *Snapshot) rebuildLists(names []string) {
	s.nodeInfoList = make([]*framework.NodeInfo, 0, len(names))
	for _, name := range names {
		if ni := s.nodeInfoMap[name]; ni != nil {
			s.nodeInfoList = append(s.nodeInfoList, ni)
		}
	}
	laidOut := make([]framework.NodeInfo, len(s.nodeInfoList))
	for i, ni := range s.nodeInfoList {
		laidOut[i] = *ni
		s.nodeInfoList[i] = &laidOut[i]
		s.nodeInfoMap[ni.Name()] = &laidOut[i]
	}
	s.rebuildAffinityLists()
}

func (s *Snapshot) rebuildAffinityLists() {
	// Room for the lists as they were and a few more: a workload that puts
	// one pod with affinity on each node changes the lists every cycle, and
	// growing them from nothing was most of the rebuild.
	s.havePodsWithAffinity = withRoomFor(len(s.havePodsWithAffinity))
	s.havePodsWithRequiredAntiAffinity = withRoomFor(len(s.havePodsWithRequiredAntiAffinity))
	for _, ni := range s.nodeInfoList {
		if len(ni.PodsWithAffinity) > 0 {
			s.havePodsWithAffinity = append(s.havePodsWithAffinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.havePodsWithRequiredAntiAffinity = append(s.havePodsWithRequiredAntiAffinity, ni)
		}
	}
}

// withRoomFor returns an empty list with room for n nodes and some more;
// nil for none, as lists of nothing are.
func withRoomFor(n int) []*framework.NodeInfo {
	if n == 0 {
		return nil
	}
	return make([]*framework.NodeInfo, 0, n+n/8+8)
}

// reset empties the snapshot so the next update copies everything.
func (s *Snapshot) reset() {
	s.nodeInfoMap = map[string]*framework.NodeInfo{}
	s.nodeInfoList = nil
	s.havePodsWithAffinity = nil
	s.havePodsWithRequiredAntiAffinity = nil
	s.generation = 0
	s.treeVersion = 0
	s.changes.restart(0)
}
