package cache

import "github.com/berth-io/berth/scheduler/framework"

// Zone and region labels, stable names first; the beta names are still
// honoured so nodes labelled the old way group the same as in Kubernetes.
const (
	labelZone       = framework.LabelTopologyZone
	labelRegion     = framework.LabelTopologyRegion
	labelZoneBeta   = "failure-domain.beta.kubernetes.io/zone"
	labelRegionBeta = "failure-domain.beta.kubernetes.io/region"
)

// zoneKey names the failure domain of a node; "" when it has none. The NUL
// separator cannot occur in a label value, so distinct region/zone pairs
// never collide.
func zoneKey(n *framework.Node) string {
	zone, ok := n.Labels[labelZone]
	if !ok {
		zone = n.Labels[labelZoneBeta]
	}
	region, ok := n.Labels[labelRegion]
	if !ok {
		region = n.Labels[labelRegionBeta]
	}
	if zone == "" && region == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// nodeTree holds the names of the known nodes grouped by zone, in insertion
// order within a zone. Its list interleaves the zones (one node of each zone
// in turn), so a scheduler that evaluates only a prefix of the list still
// samples every zone, as kube-scheduler's node tree does.
type nodeTree struct {
	zones    map[string][]string
	order    []string          // zone keys in order of first appearance
	zoneOf   map[string]string // node name -> zone key
	numNodes int
	// version moves whenever list would change, so snapshots know when to
	// rebuild their node list.
	version uint64
}

func newNodeTree() *nodeTree {
	return &nodeTree{zones: map[string][]string{}, zoneOf: map[string]string{}}
}

// add inserts or re-zones a node; adding a known node in the same zone is a
// no-op so it keeps its position.
func (t *nodeTree) add(n *framework.Node) {
	zone := zoneKey(n)
	if old, ok := t.zoneOf[n.Name]; ok {
		if old == zone {
			return
		}
		t.remove(n.Name)
	}
	if _, ok := t.zones[zone]; !ok {
		t.order = append(t.order, zone)
	}
	t.zones[zone] = append(t.zones[zone], n.Name)
	t.zoneOf[n.Name] = zone
	t.numNodes++
	t.version++
}

func (t *nodeTree) remove(name string) {
	zone, ok := t.zoneOf[name]
	if !ok {
		return
	}
	delete(t.zoneOf, name)
	t.numNodes--
	t.version++
	names := t.zones[zone]
	for i, n := range names {
		if n == name {
			names = append(names[:i], names[i+1:]...)
			break
		}
	}
	if len(names) > 0 {
		t.zones[zone] = names
		return
	}
	delete(t.zones, zone)
	for i, z := range t.order {
		if z == zone {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

// list returns every node name, zones interleaved: the i-th node of each zone
// (in zone order) before the (i+1)-th of any.
func (t *nodeTree) list() []string {
	out := make([]string, 0, t.numNodes)
	for i := 0; len(out) < t.numNodes; i++ {
		for _, zone := range t.order {
			if names := t.zones[zone]; i < len(names) {
				out = append(out, names[i])
			}
		}
	}
	return out
}
