package config

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
	"github.com/berth-io/berth/scheduler/plugins/balancedallocation"
	"github.com/berth-io/berth/scheduler/plugins/defaultpreemption"
	"github.com/berth-io/berth/scheduler/plugins/helper"
	"github.com/berth-io/berth/scheduler/plugins/interpodaffinity"
	"github.com/berth-io/berth/scheduler/plugins/names"
	"github.com/berth-io/berth/scheduler/plugins/nodeaffinity"
	"github.com/berth-io/berth/scheduler/plugins/noderesources"
	"github.com/berth-io/berth/scheduler/plugins/podtopologyspread"
)

// lines joins YAML lines, so a case's line numbers are its indexes + 1.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// testRegistry is the in-tree registry plus the plugins whose args this
// package decodes, in case the in-tree registry does not list them yet.
func testRegistry(t *testing.T) framework.Registry {
	t.Helper()
	r := plugins.NewInTreeRegistry()
	r[otherSort{}.Name()] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return otherSort{}, nil }
	for name, f := range map[string]framework.PluginFactory{
		names.DefaultPreemption: defaultpreemption.New,
		names.InterPodAffinity:  interpodaffinity.New,
		names.PodTopologySpread: podtopologyspread.New,
	} {
		if _, ok := r[name]; !ok {
			r[name] = f
		}
	}
	return r
}

// otherSort is a second QueueSort plugin, which a profile cannot add to
// PrioritySort.
type otherSort struct{}

var _ framework.QueueSortPlugin = otherSort{}

func (otherSort) Name() string                            { return "OtherSort" }
func (otherSort) Less(a, b *framework.QueuedPodInfo) bool { return a.Timestamp.Before(b.Timestamp) }

// defaultProfile is runtime.DefaultProfile named name, edited by edit.
func defaultProfile(name string, edit func(p *runtime.Profile)) *runtime.Profile {
	p := runtime.DefaultProfile()
	p.SchedulerName = name
	if edit != nil {
		edit(p)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// cmpProfiles compares profiles treating nil and empty slices alike.
var cmpProfiles = cmp.Transformer("emptyNil", func(s []runtime.PluginRef) []runtime.PluginRef {
	if len(s) == 0 {
		return nil
	}
	return s
})

var cmpStrings = cmp.Transformer("emptyNilStrings", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestParseProfiles(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *Config
	}{{
		name: "empty file: one default profile",
		yaml: "",
		want: &Config{Profiles: []*runtime.Profile{defaultProfile(DefaultSchedulerName, nil)}},
	}, {
		name: "comments only",
		yaml: lines("# nothing here", "---"),
		want: &Config{Profiles: []*runtime.Profile{defaultProfile(DefaultSchedulerName, nil)}},
	}, {
		name: "header and percentage only",
		yaml: lines(
			"apiVersion: kubescheduler.config.k8s.io/v1",
			"kind: KubeSchedulerConfiguration",
			"percentageOfNodesToScore: 40",
		),
		want: &Config{PercentageOfNodesToScore: 40, Profiles: []*runtime.Profile{defaultProfile(DefaultSchedulerName, nil)}},
	}, {
		name: "lone profile without a name gets the default name",
		yaml: lines(
			"profiles:",
			"- percentageOfNodesToScore: 0",
		),
		want: &Config{Profiles: []*runtime.Profile{defaultProfile(DefaultSchedulerName, func(p *runtime.Profile) {
			p.PercentageOfNodesToScore = ptr(int32(0))
		})}},
	}, {
		name: "multiple profiles with their own percentage",
		yaml: lines(
			"percentageOfNodesToScore: 50",
			"profiles:",
			"- schedulerName: default-scheduler",
			"- schedulerName: batch",
			"  percentageOfNodesToScore: 30",
			"- schedulerName: quick",
			"  percentageOfNodesToScore: 100",
		),
		want: &Config{PercentageOfNodesToScore: 50, Profiles: []*runtime.Profile{
			defaultProfile("default-scheduler", nil),
			defaultProfile("batch", func(p *runtime.Profile) { p.PercentageOfNodesToScore = ptr(int32(30)) }),
			defaultProfile("quick", func(p *runtime.Profile) { p.PercentageOfNodesToScore = ptr(int32(100)) }),
		}},
	}, {
		name: `multiPoint: disable "*" then enable a subset`,
		yaml: lines(
			"profiles:",
			"- schedulerName: minimal",
			"  plugins:",
			"    multiPoint:",
			"      disabled: [{name: '*'}]",
			"      enabled:",
			"      - name: PrioritySort",
			"      - name: NodeResourcesFit",
			"        weight: 4",
			"      - name: DefaultBinder",
		),
		want: &Config{Profiles: []*runtime.Profile{{
			SchedulerName: "minimal",
			Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{
				Enabled: []runtime.PluginRef{
					{Name: names.PrioritySort},
					{Name: names.NodeResourcesFit, Weight: 4},
					{Name: names.DefaultBinder},
				},
				Disabled: []string{"*"},
			},
				// Berth's own default plugins are not MultiPoint ones.
				Filter:     runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: names.RejectedNodes}}},
				PreEnqueue: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: names.Coscheduling}}},
				PreFilter:  runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: names.Coscheduling}}},
				Reserve:    runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: names.Coscheduling}}},
				Permit:     runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: names.Coscheduling}}},
			},
		}}},
	}, {
		name: "score: disable all, enable a subset with weights",
		yaml: lines(
			"profiles:",
			"- schedulerName: packer",
			"  plugins:",
			"    score:",
			"      disabled:",
			"      - name: '*'",
			"      enabled:",
			"      - {name: NodeResourcesFit, weight: 10}",
			"      - {name: TaintToleration}",
		),
		want: &Config{Profiles: []*runtime.Profile{defaultProfile("packer", func(p *runtime.Profile) {
			p.Plugins.Score = runtime.PluginSet{
				Enabled:  []runtime.PluginRef{{Name: names.NodeResourcesFit, Weight: 10}, {Name: names.TaintToleration}},
				Disabled: []string{"*"},
			}
		})}},
	}, {
		name: "multiPoint: re-enabling a default replaces it in place with its weight",
		yaml: lines(
			"profiles:",
			"- schedulerName: s",
			"  plugins:",
			"    multiPoint:",
			"      enabled:",
			"      - {name: TaintToleration, weight: 7}",
			"      disabled:",
			"      - {name: NodeName}",
		),
		want: &Config{Profiles: []*runtime.Profile{defaultProfile("s", func(p *runtime.Profile) {
			var refs []runtime.PluginRef
			for _, r := range p.Plugins.MultiPoint.Enabled {
				switch r.Name {
				case names.NodeName:
					continue
				case names.TaintToleration:
					r.Weight = 7
				}
				refs = append(refs, r)
			}
			p.Plugins.MultiPoint = runtime.PluginSet{Enabled: refs, Disabled: []string{names.NodeName}}
		})}},
	}, {
		name: "filter: disabling a default keeps the name for the MultiPoint expansion",
		yaml: lines(
			"profiles:",
			"- schedulerName: s",
			"  plugins:",
			"    filter:",
			"      disabled: [{name: NodeUnschedulable}, {name: VolumeBinding}]",
		),
		want: &Config{Profiles: []*runtime.Profile{defaultProfile("s", func(p *runtime.Profile) {
			p.Plugins.Filter.Disabled = []string{names.NodeUnschedulable, "VolumeBinding"}
		})}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpProfiles, cmpStrings); diff != "" {
				t.Errorf("Parse (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestParseEffectivePlugins checks the merged plugin sets mean what kube
// means, by building the framework and listing what runs where.
func TestParseEffectivePlugins(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		point string
		want  []string
	}{{
		name:  "score subset after disabling all",
		yaml:  lines("profiles:", "- plugins:", "    score:", "      disabled: [{name: '*'}]", "      enabled: [{name: NodeResourcesFit, weight: 3}]"),
		point: "Score",
		want:  []string{names.NodeResourcesFit},
	}, {
		name:  "filter without one default",
		yaml:  lines("profiles:", "- plugins:", "    filter:", "      disabled: [{name: NodeName}]"),
		point: "Filter",
		want:  without(defaultPoint(t, "Filter"), names.NodeName),
	}, {
		name:  "multiPoint subset reaches every point it implements",
		yaml:  lines("profiles:", "- plugins:", "    multiPoint:", "      disabled: [{name: '*'}]", "      enabled: [{name: PrioritySort}, {name: NodeResourcesFit}, {name: DefaultBinder}]"),
		point: "PreFilter",
		want:  []string{names.NodeResourcesFit, names.Coscheduling},
	}, {
		name:  "explicit score entry runs first",
		yaml:  lines("profiles:", "- plugins:", "    score:", "      enabled: [{name: NodeResourcesBalancedAllocation, weight: 2}]"),
		point: "Score",
		want:  append([]string{names.NodeResourcesBalancedAllocation}, without(defaultPoint(t, "Score"), names.NodeResourcesBalancedAllocation)...),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := listPlugins(t, cfg.Profiles[0])[tc.point]
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s plugins (-want,+got):\n%s", tc.point, diff)
			}
		})
	}
}

func listPlugins(t *testing.T, p *runtime.Profile) map[string][]string {
	t.Helper()
	fwk, err := runtime.NewFramework(context.Background(), plugins.NewInTreeRegistry(), p,
		runtime.WithSnapshotSharedLister(cache.NewEmptySnapshot()))
	if err != nil {
		t.Fatalf("NewFramework: %v", err)
	}
	return fwk.ListPlugins()
}

func defaultPoint(t *testing.T, point string) []string {
	return listPlugins(t, runtime.DefaultProfile())[point]
}

func without(list []string, name string) []string {
	var out []string
	for _, n := range list {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestParseArgs(t *testing.T) {
	tests := []struct {
		name   string
		plugin string
		args   []string // the args mapping, indented under "args:"
		want   any
	}{{
		name:   "NodeResourcesFit MostAllocated",
		plugin: names.NodeResourcesFit,
		args: []string{
			"ignoredResources: [example.com/foo]",
			"ignoredResourceGroups: [example.org]",
			"scoringStrategy:",
			"  type: MostAllocated",
			"  resources: [{name: cpu, weight: 3}, {name: memory}]",
		},
		want: &noderesources.FitArgs{
			IgnoredResources:      []string{"example.com/foo"},
			IgnoredResourceGroups: []string{"example.org"},
			ScoringStrategy: &noderesources.ScoringStrategy{
				Type:      noderesources.MostAllocated,
				Resources: []helper.ResourceSpec{{Name: "cpu", Weight: 3}, {Name: "memory"}},
			},
		},
	}, {
		name:   "NodeResourcesFit RequestedToCapacityRatio, with kube's kind",
		plugin: names.NodeResourcesFit,
		args: []string{
			"apiVersion: kubescheduler.config.k8s.io/v1",
			"kind: NodeResourcesFitArgs",
			"scoringStrategy:",
			"  type: RequestedToCapacityRatio",
			"  requestedToCapacityRatio:",
			"    shape: [{utilization: 0, score: 10}, {utilization: 80, score: 2}, {utilization: 100, score: 0}]",
		},
		want: &noderesources.FitArgs{ScoringStrategy: &noderesources.ScoringStrategy{
			Type: noderesources.RequestedToCapacityRatio,
			RequestedToCapacityRatio: &noderesources.RequestedToCapacityRatioParam{Shape: []noderesources.UtilizationShapePoint{
				{Utilization: 0, Score: 10}, {Utilization: 80, Score: 2}, {Utilization: 100, Score: 0},
			}},
		}},
	}, {
		name:   "NodeResourcesBalancedAllocation",
		plugin: names.NodeResourcesBalancedAllocation,
		args:   []string{"resources: [{name: cpu, weight: 1}, {name: example.com/gpu, weight: 1}]"},
		want: &balancedallocation.Args{Resources: []helper.ResourceSpec{
			{Name: "cpu", Weight: 1}, {Name: "example.com/gpu", Weight: 1},
		}},
	}, {
		name:   "NodeAffinity",
		plugin: names.NodeAffinity,
		args: []string{
			"addedAffinity:",
			"  requiredDuringSchedulingIgnoredDuringExecution:",
			"    nodeSelectorTerms:",
			"    - matchExpressions:",
			"      - {key: zone, operator: In, values: [a, b]}",
			"      - {key: cores, operator: Gt, values: ['8']}",
			"    - matchFields:",
			"      - {key: metadata.name, operator: NotIn, values: [n1]}",
			"  preferredDuringSchedulingIgnoredDuringExecution:",
			"  - weight: 20",
			"    preference:",
			"      matchExpressions: [{key: ssd, operator: Exists}]",
		},
		want: &nodeaffinity.Args{AddedAffinity: &framework.NodeAffinity{
			Required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{
				{MatchExpressions: []framework.NodeSelectorRequirement{
					{Key: "zone", Operator: framework.NodeSelectorOpIn, Values: []string{"a", "b"}},
					{Key: "cores", Operator: framework.NodeSelectorOpGt, Values: []string{"8"}},
				}},
				{MatchFields: []framework.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: framework.NodeSelectorOpNotIn, Values: []string{"n1"}},
				}},
			}},
			Preferred: []framework.PreferredSchedulingTerm{{
				Weight: 20,
				Preference: framework.NodeSelectorTerm{MatchExpressions: []framework.NodeSelectorRequirement{
					{Key: "ssd", Operator: framework.NodeSelectorOpExists},
				}},
			}},
		}},
	}, {
		name:   "PodTopologySpread List",
		plugin: names.PodTopologySpread,
		args: []string{
			"defaultingType: List",
			"defaultConstraints:",
			"- {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}",
			"- maxSkew: 2",
			"  topologyKey: kubernetes.io/hostname",
			"  whenUnsatisfiable: DoNotSchedule",
			"  minDomains: 3",
			"  nodeTaintsPolicy: Honor",
			"  matchLabelKeys: [app]",
		},
		want: &podtopologyspread.Args{
			DefaultingType: podtopologyspread.ListDefaulting,
			DefaultConstraints: []framework.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: framework.ScheduleAnyway},
				{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: framework.DoNotSchedule,
					MinDomains: ptr(int32(3)), NodeTaintsPolicy: framework.NodeInclusionPolicyHonor, MatchLabelKeys: []string{"app"}},
			},
		},
	}, {
		name:   "PodTopologySpread System",
		plugin: names.PodTopologySpread,
		args:   []string{"defaultingType: System"},
		want:   &podtopologyspread.Args{DefaultingType: podtopologyspread.SystemDefaulting},
	}, {
		name:   "InterPodAffinity",
		plugin: names.InterPodAffinity,
		args:   []string{"hardPodAffinityWeight: 0", "ignorePreferredTermsOfExistingPods: true"},
		want:   &interpodaffinity.Args{HardPodAffinityWeight: ptr(int32(0)), IgnorePreferredTermsOfExistingPods: true},
	}, {
		name:   "DefaultPreemption",
		plugin: names.DefaultPreemption,
		args:   []string{"minCandidateNodesPercentage: 0", "minCandidateNodesAbsolute: 50"},
		want:   &defaultpreemption.Args{MinCandidateNodesPercentage: ptr(int32(0)), MinCandidateNodesAbsolute: ptr(int32(50))},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := []string{
				"profiles:",
				"- schedulerName: s",
				"  plugins:",
				"    multiPoint:",
				"      enabled: [{name: " + tc.plugin + "}]",
				"  pluginConfig:",
				"  - name: " + tc.plugin,
				"    args:",
			}
			for _, l := range tc.args {
				doc = append(doc, "      "+l)
			}
			cfg, err := Parse([]byte(lines(doc...)), WithRegistry(testRegistry(t)))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, cfg.Profiles[0].PluginArgs[tc.plugin]); diff != "" {
				t.Errorf("args (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseNullArgsUseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(lines(
		"profiles:",
		"- pluginConfig:",
		"  - name: NodeResourcesFit",
		"  - name: TaintToleration",
		"    args: {}",
	)))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if args := cfg.Profiles[0].PluginArgs; len(args) != 0 {
		t.Errorf("PluginArgs = %v, want none", args)
	}
}

func TestLoadExample(t *testing.T) {
	cfg, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.PercentageOfNodesToScore != 50 {
		t.Errorf("PercentageOfNodesToScore = %d, want 50", cfg.PercentageOfNodesToScore)
	}
	var gotNames []string
	for _, p := range cfg.Profiles {
		gotNames = append(gotNames, p.SchedulerName)
	}
	if diff := cmp.Diff([]string{"default-scheduler", "batch"}, gotNames); diff != "" {
		t.Errorf("profiles (-want,+got):\n%s", diff)
	}
	spread := cfg.Profiles[0].PluginArgs[names.PodTopologySpread]
	wantSpread := &podtopologyspread.Args{
		DefaultingType: podtopologyspread.ListDefaulting,
		DefaultConstraints: []framework.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: framework.ScheduleAnyway},
		},
	}
	if diff := cmp.Diff(wantSpread, spread); diff != "" {
		t.Errorf("default-scheduler PodTopologySpread args (-want,+got):\n%s", diff)
	}
	fit := cfg.Profiles[1].PluginArgs[names.NodeResourcesFit].(*noderesources.FitArgs)
	if fit.ScoringStrategy.Type != noderesources.RequestedToCapacityRatio {
		t.Errorf("batch scoring = %s, want RequestedToCapacityRatio", fit.ScoringStrategy.Type)
	}
	if got := listPlugins(t, cfg.Profiles[1])["Score"]; !cmp.Equal(got, []string{names.NodeResourcesFit}) {
		t.Errorf("batch Score plugins = %v, want only NodeResourcesFit", got)
	}
}

// TestDocShowsExample keeps the example in doc.go identical to the file
// the tests load.
func TestDocShowsExample(t *testing.T) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	in := false
	for _, l := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(l, "//\tapiVersion:"):
			in = true
		case !strings.HasPrefix(l, "//"):
			in = false
		}
		if in {
			l = strings.TrimPrefix(strings.TrimPrefix(l, "//"), "\t")
			shown = append(shown, l)
		}
	}
	if diff := cmp.Diff(strings.TrimRight(string(example), "\n"), strings.Join(shown, "\n")); diff != "" {
		t.Errorf("doc.go example differs from testdata/example.yaml (-file,+doc):\n%s", diff)
	}
}
