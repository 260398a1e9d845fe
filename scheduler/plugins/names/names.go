// Package names holds the plugin names, kube-scheduler's spelling, in one
// place so profiles can name plugins without importing them.
package names

// Plugin names.
const (
	PrioritySort                    = "PrioritySort"
	Coscheduling                    = "Coscheduling"
	DefaultBinder                   = "DefaultBinder"
	DefaultPreemption               = "DefaultPreemption"
	DynamicResources                = "DynamicResources"
	ImageLocality                   = "ImageLocality"
	InterPodAffinity                = "InterPodAffinity"
	NodeAffinity                    = "NodeAffinity"
	NodeName                        = "NodeName"
	NodePorts                       = "NodePorts"
	NodeResourcesBalancedAllocation = "NodeResourcesBalancedAllocation"
	NodeResourcesFit                = "NodeResourcesFit"
	NodeUnschedulable               = "NodeUnschedulable"
	PodTopologySpread               = "PodTopologySpread"
	RejectedNodes                   = "RejectedNodes"
	SchedulingGates                 = "SchedulingGates"
	TaintToleration                 = "TaintToleration"
)
