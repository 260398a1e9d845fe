package config

import (
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// The file's shape: kube's KubeSchedulerConfiguration v1, reduced to what
// Berth acts on. Pointers tell "absent" from "zero" where kube's defaults
// depend on it.

const (
	apiVersionV1 = "kubescheduler.config.k8s.io/v1"
	kindConfig   = "KubeSchedulerConfiguration"
)

type fileV1 struct {
	APIVersion               string      `yaml:"apiVersion"`
	Kind                     string      `yaml:"kind"`
	PercentageOfNodesToScore *int32      `yaml:"percentageOfNodesToScore"`
	Profiles                 []profileV1 `yaml:"profiles"`
}

// kubeOnlyFields are KubeSchedulerConfiguration fields Berth has no use
// for (its leader election, client and backoff settings live elsewhere);
// naming them gives a clearer error than "unknown field".
var kubeOnlyFields = map[string]bool{
	"parallelism":               true,
	"leaderElection":            true,
	"clientConnection":          true,
	"healthzBindAddress":        true,
	"metricsBindAddress":        true,
	"enableProfiling":           true,
	"enableContentionProfiling": true,
	"podInitialBackoffSeconds":  true,
	"podMaxBackoffSeconds":      true,
	"extenders":                 true,
	"delayCacheUntilActive":     true,
}

func unknownFieldReason(t reflect.Type, key string) string {
	if t == reflect.TypeFor[fileV1]() && kubeOnlyFields[key] {
		return "kube-scheduler field " + strconv.Quote(key) + " is not supported by Berth"
	}
	return "unknown field " + strconv.Quote(key)
}

type profileV1 struct {
	SchedulerName            *string          `yaml:"schedulerName"`
	PercentageOfNodesToScore *int32           `yaml:"percentageOfNodesToScore"`
	Plugins                  *pluginsV1       `yaml:"plugins"`
	PluginConfig             []pluginConfigV1 `yaml:"pluginConfig"`
}

type pluginsV1 struct {
	PreEnqueue pluginSetV1 `yaml:"preEnqueue"`
	QueueSort  pluginSetV1 `yaml:"queueSort"`
	PreFilter  pluginSetV1 `yaml:"preFilter"`
	Filter     pluginSetV1 `yaml:"filter"`
	PostFilter pluginSetV1 `yaml:"postFilter"`
	PreScore   pluginSetV1 `yaml:"preScore"`
	Score      pluginSetV1 `yaml:"score"`
	Reserve    pluginSetV1 `yaml:"reserve"`
	Permit     pluginSetV1 `yaml:"permit"`
	PreBind    pluginSetV1 `yaml:"preBind"`
	Bind       pluginSetV1 `yaml:"bind"`
	PostBind   pluginSetV1 `yaml:"postBind"`
	MultiPoint pluginSetV1 `yaml:"multiPoint"`
}

type pluginSetV1 struct {
	Enabled  []pluginV1 `yaml:"enabled"`
	Disabled []pluginV1 `yaml:"disabled"`
}

type pluginV1 struct {
	Name   string `yaml:"name"`
	Weight *int32 `yaml:"weight"`
}

type pluginConfigV1 struct {
	Name string `yaml:"name"`
	// Args is decoded once Name says into what.
	Args yaml.Node `yaml:"args"`
}

// Plugin args, kube's v1 field names.

type fitArgsV1 struct {
	typeMeta              `yaml:",inline"`
	IgnoredResources      []string           `yaml:"ignoredResources"`
	IgnoredResourceGroups []string           `yaml:"ignoredResourceGroups"`
	ScoringStrategy       *scoringStrategyV1 `yaml:"scoringStrategy"`
}

type scoringStrategyV1 struct {
	Type                     string                      `yaml:"type"`
	Resources                []resourceSpecV1            `yaml:"resources"`
	RequestedToCapacityRatio *requestedToCapacityRatioV1 `yaml:"requestedToCapacityRatio"`
}

type resourceSpecV1 struct {
	Name   string `yaml:"name"`
	Weight int64  `yaml:"weight"`
}

type requestedToCapacityRatioV1 struct {
	Shape []shapePointV1 `yaml:"shape"`
}

type shapePointV1 struct {
	Utilization int32 `yaml:"utilization"`
	Score       int32 `yaml:"score"`
}

type balancedAllocationArgsV1 struct {
	typeMeta  `yaml:",inline"`
	Resources []resourceSpecV1 `yaml:"resources"`
}

type defaultPreemptionArgsV1 struct {
	typeMeta                    `yaml:",inline"`
	MinCandidateNodesPercentage *int32 `yaml:"minCandidateNodesPercentage"`
	MinCandidateNodesAbsolute   *int32 `yaml:"minCandidateNodesAbsolute"`
}

type interPodAffinityArgsV1 struct {
	typeMeta                           `yaml:",inline"`
	HardPodAffinityWeight              *int32 `yaml:"hardPodAffinityWeight"`
	IgnorePreferredTermsOfExistingPods bool   `yaml:"ignorePreferredTermsOfExistingPods"`
}

type nodeAffinityArgsV1 struct {
	typeMeta      `yaml:",inline"`
	AddedAffinity *nodeAffinityV1 `yaml:"addedAffinity"`
}

type nodeAffinityV1 struct {
	Required  *nodeSelectorV1             `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
	Preferred []preferredSchedulingTermV1 `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
}

type nodeSelectorV1 struct {
	NodeSelectorTerms []nodeSelectorTermV1 `yaml:"nodeSelectorTerms"`
}

type nodeSelectorTermV1 struct {
	MatchExpressions []selectorRequirementV1 `yaml:"matchExpressions"`
	MatchFields      []selectorRequirementV1 `yaml:"matchFields"`
}

type selectorRequirementV1 struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values"`
}

type preferredSchedulingTermV1 struct {
	Weight     int32              `yaml:"weight"`
	Preference nodeSelectorTermV1 `yaml:"preference"`
}

type podTopologySpreadArgsV1 struct {
	typeMeta           `yaml:",inline"`
	DefaultConstraints []topologySpreadConstraintV1 `yaml:"defaultConstraints"`
	DefaultingType     string                       `yaml:"defaultingType"`
}

type topologySpreadConstraintV1 struct {
	MaxSkew            int32            `yaml:"maxSkew"`
	TopologyKey        string           `yaml:"topologyKey"`
	WhenUnsatisfiable  string           `yaml:"whenUnsatisfiable"`
	LabelSelector      *labelSelectorV1 `yaml:"labelSelector"`
	MinDomains         *int32           `yaml:"minDomains"`
	NodeAffinityPolicy string           `yaml:"nodeAffinityPolicy"`
	NodeTaintsPolicy   string           `yaml:"nodeTaintsPolicy"`
	MatchLabelKeys     []string         `yaml:"matchLabelKeys"`
}

type labelSelectorV1 struct {
	MatchLabels      map[string]string       `yaml:"matchLabels"`
	MatchExpressions []selectorRequirementV1 `yaml:"matchExpressions"`
}

// typeMeta is what kube lets args carry to name their type.
type typeMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

// meta gives viaWire the typeMeta every args wire type embeds.
func (t *typeMeta) meta() *typeMeta { return t }
