package conformance

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/berth-io/berth/scheduler/plugins/names"
)

// KubeRelease is the kube-scheduler release Berth is checked against;
// conformance/go.mod pins it.
const KubeRelease = "v1.37.2"

// berthPlugins are the plugins of kube's default profile that Berth also
// has. The others (VolumeRestrictions, NodeVolumeLimits, VolumeBinding,
// VolumeZone, DynamicResources and whatever feature gates add) judge
// volumes, claims and workloads a scenario never has, so they would pass
// every node and score nothing.
var berthPlugins = map[string]bool{
	names.SchedulingGates: true, names.PrioritySort: true, names.NodeName: true, names.NodeUnschedulable: true,
	names.TaintToleration: true, names.NodeAffinity: true, names.NodePorts: true, names.NodeResourcesFit: true,
	names.PodTopologySpread: true, names.InterPodAffinity: true, names.DefaultPreemption: true,
	names.NodeResourcesBalancedAllocation: true, names.ImageLocality: true, names.DefaultBinder: true,
}

// kubeLister lets one kube framework serve every scenario; preemption
// reads the snapshot through its mutable interface.
type kubeLister struct {
	fwk.MutableSnapshotSharedLister
}

// KubeRunner runs scenarios through kube-scheduler's own in-tree plugins,
// set up from its default configuration as its plugin tests do.
type KubeRunner struct {
	lister  *kubeLister
	fw      framework.Framework
	weights map[string]int64
	// preemption is a DefaultPreemption of its own over fw, so its dry
	// run can be asked for every candidate rather than one nomination.
	preemption *defaultpreemption.DefaultPreemption
}

// NewKubeRunner builds the first profile of a configuration file (less
// the plugins Berth does not have) over an empty snapshot. The namespaces the generator
// uses exist in the fake API, as InterPodAffinity lists them for
// namespace selectors.
func NewKubeRunner(ctx context.Context, profile string) (*KubeRunner, error) {
	// The framework counts plugin calls in these; registering is idempotent.
	metrics.Register()
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode([]byte(profile), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("kube config: %w", err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("kube config: decoded a %T", obj)
	}
	prof := cfg.Profiles[0]
	var enabled []config.Plugin
	weights := map[string]int64{}
	for _, p := range prof.Plugins.MultiPoint.Enabled {
		if berthPlugins[p.Name] {
			enabled = append(enabled, p)
			weights[p.Name] = int64(p.Weight)
		}
	}
	prof.Plugins.MultiPoint.Enabled = enabled
	var objs []runtime.Object
	for _, ns := range namespaces {
		objs = append(objs, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	l := &kubeLister{cache.NewEmptySnapshot()}
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &prof,
		frameworkruntime.WithSnapshotSharedLister(l), frameworkruntime.WithMutableSnapshotLister(l), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client), frameworkruntime.WithParallelism(1),
		frameworkruntime.WithSharedDRAManager(noDeviceClasses{}), frameworkruntime.WithPodNominator(noNominations{}))
	if err != nil {
		return nil, fmt.Errorf("kube framework: %w", err)
	}
	var dpArgs *config.DefaultPreemptionArgs
	for _, pc := range prof.PluginConfig {
		if a, ok := pc.Args.(*config.DefaultPreemptionArgs); ok {
			dpArgs = a
		}
	}
	dp, err := defaultpreemption.New(ctx, dpArgs, f, plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	if err != nil {
		return nil, fmt.Errorf("kube preemption: %w", err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return &KubeRunner{lister: l, fw: f, weights: weights, preemption: dp}, nil
}

// Run schedules the scenario's pod as kube's schedulePod would, except
// that every node is filtered and scored (kube too filters every node
// below 100) and nothing is chosen: the outcome keeps all the best nodes.
// It is not safe for concurrent use.
func (r *KubeRunner) Run(ctx context.Context, sc *Scenario) (*Outcome, error) {
	var pods []*v1.Pod
	for _, p := range sc.Pods {
		pods = append(pods, asAdmitted(p))
	}
	snap := cache.NewSnapshot(pods, sc.Nodes)
	r.lister.MutableSnapshotSharedLister = snap
	pod := asAdmitted(sc.Pod)
	out := newOutcome()
	all, err := snap.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	state := framework.NewCycleState()
	preRes, st, withNodes := r.fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return nil, fmt.Errorf("kube prefilter: %w", st.AsError())
		}
		statuses := framework.NewDefaultNodeToStatus()
		for _, ni := range all {
			out.Nodes[ni.Node().Name] = rejected(st)
			statuses.Set(ni.Node().Name, st)
		}
		if err := r.preempt(ctx, state, pod, statuses, out); err != nil {
			return nil, err
		}
		out.normalize()
		return out, nil
	}
	statuses := framework.NewDefaultNodeToStatus()
	var feasible []fwk.NodeInfo
	for _, ni := range all {
		name := ni.Node().Name
		if !preRes.AllNodes() && !preRes.NodeNames.Has(name) {
			// kube's schedulePod gives nodes a PreFilter left out this
			// status, with no plugin.
			ids := withNodes.UnsortedList()
			sort.Strings(ids)
			reason := fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", ids)
			out.Nodes[name] = &NodeOutcome{Code: fwk.UnschedulableAndUnresolvable.String(), Reasons: []string{reason}}
			statuses.Set(name, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason))
			continue
		}
		st := r.fw.RunFilterPlugins(ctx, state, pod, ni)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
			out.Nodes[name] = &NodeOutcome{Feasible: true}
		case st.IsRejected():
			out.Nodes[name] = rejected(st)
			statuses.Set(name, st)
		default:
			return nil, fmt.Errorf("kube filter on %s: %w", name, st.AsError())
		}
	}
	switch len(feasible) {
	case 0:
		if err := r.preempt(ctx, state, pod, statuses, out); err != nil {
			return nil, err
		}
	case 1:
		out.Best = []string{feasible[0].Node().Name}
	default:
		if err := r.score(ctx, state, pod, feasible, out); err != nil {
			return nil, err
		}
	}
	out.normalize()
	return out, nil
}

// score records each feasible node's normalized scores (kube reports
// them weighted) and the best nodes.
func (r *KubeRunner) score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, feasible []fwk.NodeInfo, out *Outcome) error {
	if st := r.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return fmt.Errorf("kube prescore: %w", st.AsError())
	}
	scores, st := r.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return fmt.Errorf("kube score: %w", st.AsError())
	}
	totals := map[string]int64{}
	for _, ns := range scores {
		o := out.Nodes[ns.Name]
		o.Scores = map[string]int64{}
		for _, s := range ns.Scores {
			o.Scores[s.Name] = s.Score / r.weights[s.Name]
		}
		totals[ns.Name] = ns.TotalScore
	}
	out.Best = bestOf(totals)
	return nil
}

// preempt records in out every node where evicting lower-priority pods
// would let pod fit, with those victims: kube's dry run over all the
// nodes the filters found Unschedulable, before any one is chosen. A pod
// that may not preempt records nothing.
func (r *KubeRunner) preempt(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses *framework.NodeToStatus, out *Outcome) error {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return nil
	}
	potential, err := statuses.NodesForStatusCode(r.lister.NodeInfos(), fwk.Unschedulable)
	if err != nil || len(potential) == 0 {
		return err
	}
	candidates, _, err := r.preemption.Evaluator.DryRunPreemption(ctx, state, pod, potential, nil, 0, int32(len(potential)))
	if err != nil {
		return fmt.Errorf("kube preemption dry run: %w", err)
	}
	out.Candidates = map[string][]string{}
	for _, c := range candidates {
		var victims []string
		for _, v := range c.Victims().Pods {
			victims = append(victims, v.Namespace+"/"+v.Name)
		}
		out.Candidates[c.Name()] = victims
	}
	if nominee := r.preemption.Evaluator.SelectCandidate(ctx, candidates); nominee != nil {
		out.Nominated = nominee.Name()
		for _, v := range nominee.Victims().Pods {
			out.NominatedVictims = append(out.NominatedVictims, v.Namespace+"/"+v.Name)
		}
	}
	out.PreemptionBest = tiedForPreemption(candidates)
	return nil
}

// tiedForPreemption is every candidate kube's selection could pick: it
// keeps, rule by rule, the candidates best on the rule (fewest budget
// violations, lowest top victim priority, smallest sum of shifted
// priorities, fewest victims, latest start of the top-priority victims)
// and then takes the first in map order, which is random. kube exposes
// only that random pick, so the ties are computed here from its
// candidates, its victim order and its start-time helper; the pick
// itself is checked to be among them.
func tiedForPreemption(candidates []preemption.Candidate) []string {
	type key [5]int64
	keys := map[string]key{}
	var top key
	first := true
	for _, c := range candidates {
		v := c.Victims()
		var sum int64
		for _, p := range v.Pods {
			sum += int64(priority(p)) + math.MaxInt32 + 1
		}
		k := key{-v.NumPDBViolations, -int64(priority(v.Pods[0])), -sum, -int64(len(v.Pods)), util.GetEarliestPodStartTime(v).UnixNano()}
		keys[c.Name()] = k
		if first || slices.Compare(k[:], top[:]) > 0 {
			top, first = k, false
		}
	}
	var best []string
	for n, k := range keys {
		if k == top {
			best = append(best, n)
		}
	}
	return best
}

// priority is kube's PodPriority: a pod without one has 0.
func priority(p *v1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// noNominations is a queue with no nominated pods.
type noNominations struct{ fwk.PodNominator }

func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo { return nil }

// noDeviceClasses is a cluster without DRA device classes: resource
// plugins then ask it whether an extended resource is backed by DRA, and
// none is, so extended resources are counted from node allocatable as
// Berth does. Nothing else of it is used without claims.
type noDeviceClasses struct{ fwk.SharedDRAManager }

func (noDeviceClasses) DeviceClassResolver() fwk.DeviceClassResolver { return noDeviceClasses{} }

func (noDeviceClasses) GetDeviceClass(v1.ResourceName) *resourceapi.DeviceClass { return nil }

func rejected(st *fwk.Status) *NodeOutcome {
	return &NodeOutcome{Plugin: st.Plugin(), Code: st.Code().String(), Reasons: append([]string(nil), st.Reasons()...)}
}

// asAdmitted is the pod as the API server stores it: it merges each pod
// affinity term's matchLabelKeys (In the pod's value) and
// mismatchLabelKeys (NotIn) into the term's selector when the pod has
// the label, and kube-scheduler relies on that. Berth does it itself.
func asAdmitted(p *v1.Pod) *v1.Pod {
	a := p.Spec.Affinity
	if a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		return p
	}
	p = p.DeepCopy()
	merge := func(t *v1.PodAffinityTerm) {
		for _, keys := range []struct {
			keys []string
			op   metav1.LabelSelectorOperator
		}{{t.MatchLabelKeys, metav1.LabelSelectorOpIn}, {t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn}} {
			for _, k := range keys.keys {
				v, ok := p.Labels[k]
				if !ok {
					continue
				}
				if t.LabelSelector == nil {
					t.LabelSelector = &metav1.LabelSelector{}
				}
				t.LabelSelector.MatchExpressions = append(t.LabelSelector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: k, Operator: keys.op, Values: []string{v}})
			}
		}
	}
	if pa := p.Spec.Affinity.PodAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			merge(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			merge(&pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
	}
	if pa := p.Spec.Affinity.PodAntiAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			merge(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			merge(&pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
	}
	return p
}
