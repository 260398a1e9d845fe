package config

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// Long for its table: one case per behaviour, kept together so they
// read side by side.
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

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load error = %v, want fs.ErrNotExist", err)
	}
}
