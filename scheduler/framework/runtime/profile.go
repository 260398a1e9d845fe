package runtime

import "github.com/berth-io/berth/scheduler/plugins/names"

// PluginRef enables one plugin; Weight matters only at Score, where 0
// means 1.
type PluginRef struct {
	Name   string
	Weight int32
}

// PluginSet configures one extension point.
type PluginSet struct {
	// Enabled plugins run at this point, in this order (see Plugins for how
	// they merge with MultiPoint).
	Enabled []PluginRef
	// Disabled names MultiPoint plugins that must not run here; "*"
	// disables all of them.
	Disabled []string
}

// Plugins configures every extension point. As in kube-scheduler, a
// plugin in MultiPoint runs at every point it implements. At each point
// the order is: MultiPoint plugins that the point's own Enabled list
// names again (in that list's order, with that list's weight), then the
// other MultiPoint plugins, then the rest of Enabled.
type Plugins struct {
	MultiPoint PluginSet
	QueueSort  PluginSet
	PreEnqueue PluginSet
	PreFilter  PluginSet
	Filter     PluginSet
	PostFilter PluginSet
	PreScore   PluginSet
	Score      PluginSet
	Reserve    PluginSet
	Permit     PluginSet
	PreBind    PluginSet
	Bind       PluginSet
	PostBind   PluginSet
}

// Profile is one named scheduler configuration. Pods pick it by
// SchedulerName.
type Profile struct {
	SchedulerName string
	Plugins       Plugins
	// PluginArgs holds each plugin's own args type by plugin name; a plugin
	// with no entry uses its defaults.
	PluginArgs map[string]any
	// PercentageOfNodesToScore overrides the scheduler-wide value for this
	// profile when set.
	PercentageOfNodesToScore *int32
}

// DefaultProfile returns kube-scheduler's default profile restricted to the
// plugins Berth implements, in kube's order and with kube's score weights.
// Kube's full MultiPoint order is: SchedulingGates, PrioritySort,
// NodeUnschedulable, NodeName, TaintToleration(3), NodeAffinity(2),
// NodePorts, NodeResourcesFit(1), VolumeRestrictions, NodeVolumeLimits,
// VolumeBinding, VolumeZone, PodTopologySpread(2), InterPodAffinity(2),
// DefaultPreemption, NodeResourcesBalancedAllocation(1), ImageLocality(1),
// DefaultBinder; new plugins take their place in that order. Berth's own
// plugins, which kube lacks, are enabled at their extension point after
// kube's: RejectedNodes at Filter; Coscheduling (gangs) at PreEnqueue,
// PreFilter, Reserve and Permit, where pods outside a pod group pass it at
// once.
func DefaultProfile() *Profile {
	return &Profile{
		Plugins: Plugins{
			Filter:     PluginSet{Enabled: []PluginRef{{Name: names.RejectedNodes}}},
			PreEnqueue: PluginSet{Enabled: []PluginRef{{Name: names.Coscheduling}}},
			PreFilter:  PluginSet{Enabled: []PluginRef{{Name: names.Coscheduling}}},
			Reserve:    PluginSet{Enabled: []PluginRef{{Name: names.Coscheduling}}},
			Permit:     PluginSet{Enabled: []PluginRef{{Name: names.Coscheduling}}},
			MultiPoint: PluginSet{Enabled: []PluginRef{
				{Name: names.SchedulingGates},
				{Name: names.PrioritySort},
				{Name: names.NodeUnschedulable},
				{Name: names.NodeName},
				{Name: names.TaintToleration, Weight: 3},
				{Name: names.NodeAffinity, Weight: 2},
				{Name: names.NodePorts},
				{Name: names.NodeResourcesFit, Weight: 1},
				{Name: names.PodTopologySpread, Weight: 2},
				{Name: names.InterPodAffinity, Weight: 2},
				{Name: names.DefaultPreemption},
				{Name: names.NodeResourcesBalancedAllocation, Weight: 1},
				{Name: names.ImageLocality, Weight: 1},
				{Name: names.DefaultBinder},
			}},
		},
	}
}
