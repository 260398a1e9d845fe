package runtime

import (
	"reflect"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// TestForAddingKnowsEveryNodeInfoField: forAdding copies only what
// AddPodInfo changes. A new NodeInfo field must be classified here, after
// checking whether AddPodInfo changes it (then forAdding must copy it).
func TestForAddingKnowsEveryNodeInfoField(t *testing.T) {
	known := map[string]string{
		"node":                         "shared: never changed",
		"Pods":                         "clipped",
		"PodsWithAffinity":             "clipped",
		"PodsWithRequiredAntiAffinity": "clipped",
		"UsedPorts":                    "copied when a pod added uses host ports",
		"Requested":                    "copied",
		"NonZeroRequested":             "copied",
		"Allocatable":                  "shared: AddPodInfo leaves it",
		"ImageStates":                  "shared: AddPodInfo leaves it",
		"Generation":                   "a value",
		"byPriority":                   "shared: AddPodInfo replaces it, never changes it in place",
		"name":                         "a value, set with the node",
		"nameHash":                     "a value, set with the node",
		"unschedulable":                "a value, set with the node",
		"tainted":                      "a value, set with the node",
		"topology":                     "a value, set with the node",
		"hasTopology":                  "a value, set with the node",
		"canonical":                    "a value, set with the node",
	}
	typ := reflect.TypeFor[framework.NodeInfo]()
	for i := range typ.NumField() {
		if _, ok := known[typ.Field(i).Name]; !ok {
			t.Errorf("NodeInfo.%s is new: check forAdding (and defaultpreemption's withoutLowerPriority), then list it here", typ.Field(i).Name)
		}
	}
}
