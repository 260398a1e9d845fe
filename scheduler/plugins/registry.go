// Package plugins assembles the in-tree plugins.
package plugins

import (
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/balancedallocation"
	"github.com/berth-io/berth/scheduler/plugins/coscheduling"
	"github.com/berth-io/berth/scheduler/plugins/defaultbinder"
	"github.com/berth-io/berth/scheduler/plugins/defaultpreemption"
	"github.com/berth-io/berth/scheduler/plugins/imagelocality"
	"github.com/berth-io/berth/scheduler/plugins/interpodaffinity"
	"github.com/berth-io/berth/scheduler/plugins/nodeaffinity"
	"github.com/berth-io/berth/scheduler/plugins/nodename"
	"github.com/berth-io/berth/scheduler/plugins/nodeports"
	"github.com/berth-io/berth/scheduler/plugins/noderesources"
	"github.com/berth-io/berth/scheduler/plugins/nodeunschedulable"
	"github.com/berth-io/berth/scheduler/plugins/podtopologyspread"
	"github.com/berth-io/berth/scheduler/plugins/queuesort"
	"github.com/berth-io/berth/scheduler/plugins/rejectednodes"
	"github.com/berth-io/berth/scheduler/plugins/schedulinggates"
	"github.com/berth-io/berth/scheduler/plugins/tainttoleration"
)

// NewInTreeRegistry returns a fresh registry of every built-in plugin; the
// caller may add its own to it.
func NewInTreeRegistry() framework.Registry {
	return framework.Registry{
		coscheduling.Name:       coscheduling.New,
		queuesort.Name:          queuesort.New,
		nodeunschedulable.Name:  nodeunschedulable.New,
		nodename.Name:           nodename.New,
		tainttoleration.Name:    tainttoleration.New,
		noderesources.Name:      noderesources.New,
		balancedallocation.Name: balancedallocation.New,
		defaultbinder.Name:      defaultbinder.New,
		defaultpreemption.Name:  defaultpreemption.New,
		schedulinggates.Name:    schedulinggates.New,
		nodeaffinity.Name:       nodeaffinity.New,
		nodeports.Name:          nodeports.New,
		imagelocality.Name:      imagelocality.New,
		interpodaffinity.Name:   interpodaffinity.New,
		podtopologyspread.Name:  podtopologyspread.New,
		rejectednodes.Name:      rejectednodes.New,
	}
}
