package plugins_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

func TestDefaultProfileWithInTreeRegistry(t *testing.T) {
	f, err := runtime.NewFramework(context.Background(), plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(fwtest.NewLister()), runtime.WithBinder(&fwtest.Binder{}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"QueueSort": {"PrioritySort"},
		"PreFilter": {"NodeResourcesFit"},
		"Filter":    {"NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit"},
		"PreScore":  {"TaintToleration", "NodeResourcesFit", "NodeResourcesBalancedAllocation"},
		"Score":     {"TaintToleration", "NodeResourcesFit", "NodeResourcesBalancedAllocation"},
		"Bind":      {"DefaultBinder"},
	}
	if diff := cmp.Diff(want, f.ListPlugins()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	var withEvents []string
	for name := range f.EventsToRegister() {
		withEvents = append(withEvents, name)
	}
	if diff := cmp.Diff([]string{"NodeName", "NodeResourcesFit", "NodeUnschedulable", "TaintToleration"}, runtime.SortedNames(toSet(withEvents))); diff != "" {
		t.Errorf("plugins with events (-want,+got):\n%s", diff)
	}
}

func toSet(s []string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, v := range s {
		m[v] = struct{}{}
	}
	return m
}
