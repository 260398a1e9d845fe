package limits

import "google.golang.org/protobuf/reflect/protoreflect"

// MaxObjectBytes is the largest encoded pod, node, pod group or budget Berth
// stores. etcd refuses a request over its own limit (Berth's embedded etcd
// takes 8 MiB, etcd's default is 1.5 MiB); a group commit may carry many
// objects, so one object is kept far below either.
const MaxObjectBytes = 256 << 10

// Berth returns the bounds of Berth's API. The defaults are generous for
// what a real pod or node carries; the overrides tighten the fields whose
// size multiplies scheduling work (every term is evaluated against every
// node or every pod) and loosen the few that are naturally long.
func Berth() *Limits {
	return &Limits{
		MaxString:      1024,
		MaxItems:       64,
		MaxObjectBytes: MaxObjectBytes,
		Objects: map[protoreflect.FullName]bool{
			"berth.v1.Pod":              true,
			"berth.v1.Node":             true,
			"berth.v1.PodGroup":         true,
			"berth.v1.DisruptionBudget": true,
		},
		// SubmitPods answers per pod: the handler checks each one.
		PerItem: map[protoreflect.FullName]bool{"berth.v1.SubmitPodsRequest.pods": true},
		Fields: map[protoreflect.FullName]Bound{
			"berth.v1.SubmitPodsRequest.pods": 1000,
			"berth.v1.Node.images":            256,
			"berth.v1.ContainerImage.names":   16,
			"berth.v1.Container.image":        4096,
			"berth.v1.Container.ports":        128,
			// Terms are evaluated per node or per existing pod on every
			// cycle: these bounds cap one pod's scheduling cost.
			"berth.v1.Pod.tolerations":                           128,
			"berth.v1.Pod.topology_spread_constraints":           16,
			"berth.v1.Pod.scheduling_gates":                      32,
			"berth.v1.UpdatePodRequest.scheduling_gates":         32,
			"berth.v1.NodeSelector.node_selector_terms":          32,
			"berth.v1.NodeSelectorTerm.match_expressions":        32,
			"berth.v1.NodeSelectorTerm.match_fields":             8,
			"berth.v1.NodeSelectorRequirement.values":            256,
			"berth.v1.NodeAffinity.preferred":                    32,
			"berth.v1.PodAffinity.required":                      32,
			"berth.v1.PodAffinity.preferred":                     32,
			"berth.v1.PodAntiAffinity.required":                  32,
			"berth.v1.PodAntiAffinity.preferred":                 32,
			"berth.v1.PodAffinityTerm.namespaces":                64,
			"berth.v1.LabelSelector.match_expressions":           32,
			"berth.v1.LabelSelectorRequirement.values":           256,
			"berth.v1.PodAffinityTerm.match_label_keys":          32,
			"berth.v1.PodAffinityTerm.mismatch_label_keys":       32,
			"berth.v1.TopologySpreadConstraint.match_label_keys": 32,
		},
	}
}
