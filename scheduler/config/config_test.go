package config

import (
	"context"
	"errors"
	"io/fs"
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

func TestParseErrors(t *testing.T) {
	type wantErr struct {
		line   int
		path   string
		reason string // a substring of Reason
	}
	tests := []struct {
		name string
		yaml string
		want []wantErr
	}{{
		name: "invalid YAML",
		yaml: lines("profiles:", "- schedulerName: a", "  plugins: x", "    filter: y"),
		want: []wantErr{{4, "", "invalid YAML: mapping values are not allowed"}},
	}, {
		name: "two documents",
		yaml: lines("percentageOfNodesToScore: 1", "---", "percentageOfNodesToScore: 2"),
		want: []wantErr{{2, "", "only one YAML document"}},
	}, {
		name: "header",
		yaml: lines("apiVersion: kubescheduler.config.k8s.io/v1beta3", "kind: Scheduler"),
		want: []wantErr{
			{1, "apiVersion", `unsupported apiVersion "kubescheduler.config.k8s.io/v1beta3"`},
			{2, "kind", `unsupported kind "Scheduler"`},
		},
	}, {
		name: "percentages out of range",
		yaml: lines("percentageOfNodesToScore: -1", "profiles:", "- schedulerName: a", "  percentageOfNodesToScore: 101"),
		want: []wantErr{
			{1, "percentageOfNodesToScore", "-1 not in valid range [0, 100]"},
			{4, "profiles[0].percentageOfNodesToScore", "101 not in valid range [0, 100]"},
		},
	}, {
		name: "unknown and kube-only fields",
		yaml: lines("leaderElection: {leaderElect: false}", "profiles:", "- schedulerName: a", "  plugin: {}", "  plugins:", "    filters: {}"),
		want: []wantErr{
			{1, "leaderElection", `kube-scheduler field "leaderElection" is not supported by Berth`},
			{4, "profiles[0].plugin", `unknown field "plugin"`},
			{6, "profiles[0].plugins.filters", `unknown field "filters"`},
		},
	}, {
		name: "field given twice",
		yaml: lines("profiles:", "- schedulerName: a", "  schedulerName: b"),
		want: []wantErr{{3, "profiles[0].schedulerName", "field given twice"}},
	}, {
		name: "wrong types",
		yaml: lines(
			"percentageOfNodesToScore: half",
			"profiles:",
			"- schedulerName: [a]",
			"  plugins:",
			"    score:",
			"      enabled: {name: NodeResourcesFit}",
			"    filter:",
			"      enabled:",
			"      - {name: NodeName, weight: 1.5}",
		),
		want: []wantErr{
			{1, "percentageOfNodesToScore", `want an integer, got "half"`},
			{3, "profiles[0].schedulerName", "want a string, got a list"},
			{6, "profiles[0].plugins.score.enabled", "want a list, got a mapping"},
			{9, "profiles[0].plugins.filter.enabled[0].weight", "want an integer, got number 1.5"},
		},
	}, {
		name: "integer overflow",
		yaml: lines("percentageOfNodesToScore: 4294967296"),
		want: []wantErr{{1, "percentageOfNodesToScore", "does not fit in 32 bits"}},
	}, {
		name: "scheduler names: missing and duplicate",
		yaml: lines("profiles:", "- schedulerName: a", "- percentageOfNodesToScore: 1", "- schedulerName: a"),
		want: []wantErr{
			{3, "profiles[1].schedulerName", "required"},
			{4, "profiles[2].schedulerName", `duplicate scheduler name "a" (also profiles[0])`},
		},
	}, {
		name: "plugin names",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  plugins:",
			"    filter:",
			"      enabled:",
			"      - name: NodeNam",
			"      - name: VolumeBinding",
			"      - name: '*'",
			"      - name: NodeName",
			"      - name: NodeName",
			"      disabled:",
			"      - name: Typo",
		),
		want: []wantErr{
			{6, "profiles[0].plugins.filter.enabled[0].name", `unknown plugin "NodeNam" (known: `},
			{7, "profiles[0].plugins.filter.enabled[1].name", `kube-scheduler plugin "VolumeBinding" is not implemented by Berth`},
			{8, "profiles[0].plugins.filter.enabled[2].name", `"*" is only allowed in disabled`},
			{10, "profiles[0].plugins.filter.enabled[4].name", "plugin NodeName already enabled at profiles[0].plugins.filter.enabled[3]"},
			{12, "profiles[0].plugins.filter.disabled[0].name", `unknown plugin "Typo"`},
		},
	}, {
		name: "weights",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  plugins:",
			"    score:",
			"      enabled:",
			"      - {name: NodeResourcesFit, weight: -1}",
			"    multiPoint:",
			"      enabled:",
			"      - {name: TaintToleration, weight: 101}",
		),
		want: []wantErr{
			{6, "profiles[0].plugins.score.enabled[0].weight", "-1 not in valid range [0, 100]"},
			{9, "profiles[0].plugins.multiPoint.enabled[0].weight", "101 not in valid range [0, 100]"},
		},
	}, {
		name: "plugin enabled at a point it does not implement",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  plugins:",
			"    filter:",
			"      enabled:",
			"      - name: NodeResourcesBalancedAllocation",
		),
		want: []wantErr{{6, "profiles[0].plugins.filter.enabled[0].name",
			"plugin NodeResourcesBalancedAllocation does not implement filter (it implements preScore, score)"}},
	}, {
		name: "pluginConfig names",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: Nope",
			"  - name: NodeResourcesFit",
			"  - name: NodeResourcesFit",
			"  - name: TaintToleration",
			"    args: {weight: 1}",
			"  - args: {}",
		),
		want: []wantErr{
			{4, "profiles[0].pluginConfig[0].name", `unknown plugin "Nope"`},
			{6, "profiles[0].pluginConfig[2].name", "plugin NodeResourcesFit already configured at profiles[0].pluginConfig[1]"},
			{8, "profiles[0].pluginConfig[3].args", "plugin TaintToleration takes no args"},
			{9, "profiles[0].pluginConfig[4].name", "required"},
		},
	}, {
		name: "args: strict fields and kind",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: NodeResourcesFit",
			"    args:",
			"      kind: NodeAffinityArgs",
			"      scoringStrategy:",
			"        typ: MostAllocated",
		),
		want: []wantErr{
			{6, "profiles[0].pluginConfig[0].args.kind", `kind "NodeAffinityArgs" does not match plugin NodeResourcesFit (want NodeResourcesFitArgs)`},
			{7, "profiles[0].pluginConfig[0].args.scoringStrategy.type", "required"},
			{8, "profiles[0].pluginConfig[0].args.scoringStrategy.typ", `unknown field "typ"`},
		},
	}, {
		name: "NodeResourcesFit values",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: NodeResourcesFit",
			"    args:",
			"      ignoredResourceGroups: [example.com/x]",
			"      scoringStrategy:",
			"        type: Most",
			"        resources:",
			"        - {name: cpu, weight: 101}",
			"        - {name: cpu}",
			"        requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}]}",
			"  - name: NodeResourcesBalancedAllocation",
			"    args:",
			"      resources: [{name: cpu, weight: 2}]",
		),
		want: []wantErr{
			{6, "profiles[0].pluginConfig[0].args.ignoredResourceGroups[0]", `resource group "example.com/x" must not contain '/'`},
			{8, "profiles[0].pluginConfig[0].args.scoringStrategy.type",
				`unknown type "Most" (want LeastAllocated, MostAllocated or RequestedToCapacityRatio)`},
			{10, "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight", "101 not in valid range [1, 100]"},
			{11, "profiles[0].pluginConfig[0].args.scoringStrategy.resources[1].name", `"cpu" is already listed at profiles[0].pluginConfig[0].args.scoringStrategy.resources[0]`},
			{12, "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio", "only allowed when type is RequestedToCapacityRatio"},
			{15, "profiles[0].pluginConfig[1].args.resources[0].weight", "must be 1"},
		},
	}, {
		name: "RequestedToCapacityRatio shape",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: NodeResourcesFit",
			"    args:",
			"      scoringStrategy:",
			"        type: RequestedToCapacityRatio",
			"        requestedToCapacityRatio:",
			"          shape:",
			"          - {utilization: 50, score: 1}",
			"          - {utilization: 50, score: 11}",
			"          - utilization: 101",
			"- schedulerName: b",
			"  pluginConfig:",
			"  - name: NodeResourcesFit",
			"    args: {scoringStrategy: {type: RequestedToCapacityRatio}}",
		),
		want: []wantErr{
			{11, "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization", "50 must be greater than the previous point's 50"},
			{11, "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].score", "11 not in valid range [0, 10]"},
			{12, "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[2].utilization", "101 not in valid range [0, 100]"},
			{16, "profiles[1].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape", "at least one point is required"},
		},
	}, {
		name: "PodTopologySpread, InterPodAffinity and DefaultPreemption values",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: PodTopologySpread",
			"    args:",
			"      defaultConstraints:",
			"      - maxSkew: 0",
			"        topologyKey: zone",
			"        whenUnsatisfiable: Maybe",
			"        labelSelector: {matchLabels: {app: x}}",
			"      - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Maybe}",
			"  - name: InterPodAffinity",
			"    args: {hardPodAffinityWeight: 101}",
			"  - name: DefaultPreemption",
			"    args:",
			"      minCandidateNodesPercentage: 0",
			"      minCandidateNodesAbsolute: 0",
		),
		want: []wantErr{
			{5, "profiles[0].pluginConfig[0].args.defaultingType", "must be List when defaultConstraints are given"},
			{7, "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew", "0 must be greater than 0"},
			{9, "profiles[0].pluginConfig[0].args.defaultConstraints[0].whenUnsatisfiable", `unknown action "Maybe"`},
			{10, "profiles[0].pluginConfig[0].args.defaultConstraints[0].labelSelector", "must not be set"},
			{11, "profiles[0].pluginConfig[0].args.defaultConstraints[1].whenUnsatisfiable", `unknown action "Maybe"`},
			{11, "profiles[0].pluginConfig[0].args.defaultConstraints[1]", "repeats {zone, Maybe} of profiles[0].pluginConfig[0].args.defaultConstraints[0]"},
			{13, "profiles[0].pluginConfig[1].args.hardPodAffinityWeight", "101 not in valid range [0, 100]"},
			{16, "profiles[0].pluginConfig[2].args.minCandidateNodesPercentage", "cannot be zero at the same time as minCandidateNodesAbsolute"},
		},
	}, {
		name: "NodeAffinity selector values",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: NodeAffinity",
			"    args:",
			"      addedAffinity:",
			"        requiredDuringSchedulingIgnoredDuringExecution:",
			"          nodeSelectorTerms:",
			"          - matchExpressions:",
			"            - {key: zone, operator: Near, values: [a]}",
			"            - {key: cores, operator: Gt, values: [many]}",
			"            matchFields:",
			"            - {key: metadata.uid, operator: In, values: [x]}",
			"        preferredDuringSchedulingIgnoredDuringExecution:",
			"        - weight: 1",
			"          preference:",
			"            matchExpressions: [{key: ssd, operator: Exists, values: [yes]}]",
		),
		want: []wantErr{
			{10, "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator", `unknown operator "Near"`},
			{11, "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values[0]", `"many" is not an integer`},
			{13, "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key", `unsupported field "metadata.uid"`},
			{17, "profiles[0].pluginConfig[0].args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values", "must be empty for operator Exists"},
		},
	}, {
		name: "a plugin's own validation is reported at its args",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  pluginConfig:",
			"  - name: NodeAffinity",
			"    args:",
			"      addedAffinity:",
			"        requiredDuringSchedulingIgnoredDuringExecution:",
			"          nodeSelectorTerms: [{matchExpressions: [{key: 'bad key!', operator: Exists}]}]",
		),
		want: []wantErr{{5, "profiles[0].pluginConfig[0].args", `"bad key!"`}},
	}, {
		name: "profiles must share the queue sort",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"- schedulerName: b",
			"  plugins:",
			"    queueSort:",
			"      disabled: [{name: '*'}]",
		),
		want: []wantErr{{5, "profiles[1].plugins.queueSort", "queue sort (none) differs from profiles[0]'s PrioritySort"}},
	}, {
		name: "building the whole profile fails",
		yaml: lines(
			"profiles:",
			"- schedulerName: a",
			"  plugins:",
			"    queueSort:",
			"      enabled: [{name: OtherSort}]",
		),
		want: []wantErr{{2, "profiles[0]", "at most one is allowed"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), WithRegistry(testRegistry(t)))
			var got Errors
			if !errors.As(err, &got) {
				t.Fatalf("Parse error = %v, want Errors", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(got), len(tc.want), err)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Line != w.line || g.Path != w.path || !strings.Contains(g.Reason, w.reason) {
					t.Errorf("error %d = line %d, path %q, reason %q; want line %d, path %q, reason containing %q",
						i, g.Line, g.Path, g.Reason, w.line, w.path, w.reason)
				}
			}
		})
	}
}

func TestParseAliasBomb(t *testing.T) {
	// 64 terms of 64 expressions of 64 values: 270k nodes from 1 KB.
	rep := func(first, alias string) string {
		return "[" + first + strings.Repeat(", "+alias, 63) + "]"
	}
	values := "&v " + rep("a", "a")
	exprs := rep("&e {key: k, operator: In, values: "+values+"}", "*e")
	terms := rep("&t {matchExpressions: "+exprs+"}", "*t")
	yaml := lines(
		"profiles:",
		"- pluginConfig:",
		"  - name: NodeAffinity",
		"    args:",
		"      addedAffinity:",
		"        requiredDuringSchedulingIgnoredDuringExecution:",
		"          nodeSelectorTerms: "+terms,
	)
	_, err := Parse([]byte(yaml))
	var got Errors
	if !errors.As(err, &got) || len(got) != 1 || !strings.Contains(got[0].Reason, "too deep or too large") {
		t.Fatalf("Parse error = %v, want one 'too large' error", err)
	}
}

func TestErrorFormat(t *testing.T) {
	yaml := lines(
		"profiles:",
		"- schedulerName: a",
		"  pluginConfig:",
		"  - name: NodeResourcesFit",
		"    args:",
		"      scoringStrategy:",
		"        type: Most",
	)
	for _, tc := range []struct {
		file string
		want string
	}{
		{"config.yaml", `config.yaml:7: profiles[0].pluginConfig[0].args.scoringStrategy.type: unknown type "Most" (want LeastAllocated, MostAllocated or RequestedToCapacityRatio)`},
		{"", `line 7: profiles[0].pluginConfig[0].args.scoringStrategy.type: unknown type "Most" (want LeastAllocated, MostAllocated or RequestedToCapacityRatio)`},
	} {
		_, err := Parse([]byte(yaml), WithFileName(tc.file))
		if err == nil || err.Error() != tc.want {
			t.Errorf("file %q: error = %v, want %s", tc.file, err, tc.want)
		}
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

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load error = %v, want fs.ErrNotExist", err)
	}
}
