package auth

import (
	"strconv"
	"strings"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// target is what a request touches, for the namespace check and the audit.
type target struct {
	// cluster: the call reads or changes cluster-scoped state (nodes,
	// replicas), which only an unrestricted grant may.
	cluster bool
	// namespaces the call touches; "" stands for all of them (a List
	// without a namespace).
	namespaces []string
	// object names it in the audit log.
	object string
}

// rule is how one RPC is authorized.
type rule struct {
	write bool
	// target reads the request; nil for streams, whose request arrives
	// after the check (WatchBindings filters its events instead).
	target func(req any) target
}

const (
	clusterSvc   = "/berth.v1.ClusterService/"
	podSvc       = "/berth.v1.PodService/"
	schedulerSvc = "/berth.v1.SchedulerService/"
	// watchBindings is the one stream, filtered by namespace.
	watchBindings = schedulerSvc + "WatchBindings"
)

func clusterObject(kind string, name func(req any) string) func(any) target {
	return func(req any) target { return target{cluster: true, object: kind + " " + name(req)} }
}

func namespaced(kind string, nsName func(req any) (string, string)) func(any) target {
	return func(req any) target {
		ns, name := nsName(req)
		return target{namespaces: []string{ns}, object: kind + " " + ns + "/" + name}
	}
}

// listIn is a List of one namespace, or of all when ns is "".
func listIn(kind string, ns func(req any) string) func(any) target {
	return func(req any) target {
		n := ns(req)
		obj := kind + " in " + n
		if n == "" {
			obj = kind + " in all namespaces"
		}
		return target{namespaces: []string{n}, object: obj}
	}
}

type nsNamed interface {
	GetNamespace() string
	GetName() string
}

func byNsName(req any) (string, string) {
	r, _ := req.(nsNamed)
	if r == nil {
		return "", ""
	}
	return r.GetNamespace(), r.GetName()
}

type named interface{ GetName() string }

func byName(req any) string {
	if r, ok := req.(named); ok {
		return r.GetName()
	}
	return ""
}

func podOf(pod func(req any) *berthv1.Pod) func(any) target {
	return namespaced("pod", func(req any) (string, string) {
		p := pod(req)
		return p.GetNamespace(), p.GetName()
	})
}

// submitPods touches every pod's namespace.
func submitPods(req any) target {
	pods := as[*berthv1.SubmitPodsRequest](req).GetPods()
	t := target{object: strconv.Itoa(len(pods)) + " pods"}
	seen := map[string]bool{}
	for _, p := range pods {
		if !seen[p.GetNamespace()] {
			seen[p.GetNamespace()] = true
			t.namespaces = append(t.namespaces, p.GetNamespace())
		}
	}
	if len(pods) == 1 {
		t.object = "pod " + pods[0].GetNamespace() + "/" + pods[0].GetName()
	}
	return t
}

func explain(req any) target {
	r := as[*berthv1.ExplainRequest](req)
	if ref := r.GetExisting(); ref != nil {
		return target{namespaces: []string{ref.GetNamespace()}, object: "pod " + ref.GetNamespace() + "/" + ref.GetName()}
	}
	return target{namespaces: []string{r.GetPod().GetNamespace()}, object: "pod " + r.GetPod().GetNamespace() + "/" + r.GetPod().GetName() + " (inline)"}
}

// rules covers every RPC of the Berth services. A method missing here
// (one added later) is admin-only until given a rule.
var rules = map[string]rule{
	clusterSvc + "UpsertNode": {write: true, target: clusterObject("node", func(req any) string {
		return as[*berthv1.UpsertNodeRequest](req).GetNode().GetName()
	})},
	clusterSvc + "DeleteNode":     {write: true, target: clusterObject("node", byName)},
	clusterSvc + "RenewNodeLease": {write: true, target: clusterObject("node lease", byName)},
	clusterSvc + "GetNode":        {target: clusterObject("node", byName)},
	clusterSvc + "ListNodes":      {target: clusterObject("nodes", func(any) string { return "all" })},
	clusterSvc + "UpsertDisruptionBudget": {write: true, target: namespaced("budget", func(req any) (string, string) {
		b := as[*berthv1.UpsertDisruptionBudgetRequest](req).GetBudget()
		return b.GetNamespace(), b.GetName()
	})},
	clusterSvc + "DeleteDisruptionBudget": {write: true, target: namespaced("budget", byNsName)},
	clusterSvc + "ListDisruptionBudgets": {target: listIn("budgets", func(req any) string {
		return as[*berthv1.ListDisruptionBudgetsRequest](req).GetNamespace()
	})},

	podSvc + "SubmitPod": {write: true, target: podOf(func(req any) *berthv1.Pod {
		return as[*berthv1.SubmitPodRequest](req).GetPod()
	})},
	podSvc + "SubmitPods":     {write: true, target: submitPods},
	podSvc + "DeletePod":      {write: true, target: namespaced("pod", byNsName)},
	podSvc + "UpdatePod":      {write: true, target: namespaced("pod", byNsName)},
	podSvc + "ConfirmBinding": {write: true, target: namespaced("pod", byNsName)},
	podSvc + "RejectBinding":  {write: true, target: namespaced("pod", byNsName)},
	podSvc + "CompletePod":    {write: true, target: namespaced("pod", byNsName)},
	podSvc + "GetPod":         {target: namespaced("pod", byNsName)},
	podSvc + "ListPods": {target: listIn("pods", func(req any) string {
		return as[*berthv1.ListPodsRequest](req).GetNamespace()
	})},
	podSvc + "UpsertPodGroup": {write: true, target: namespaced("pod group", func(req any) (string, string) {
		g := as[*berthv1.UpsertPodGroupRequest](req).GetPodGroup()
		return g.GetNamespace(), g.GetName()
	})},
	podSvc + "DeletePodGroup": {write: true, target: namespaced("pod group", byNsName)},
	podSvc + "GetPodGroup":    {target: namespaced("pod group", byNsName)},
	podSvc + "ListPodGroups": {target: listIn("pod groups", func(req any) string {
		return as[*berthv1.ListPodGroupsRequest](req).GetNamespace()
	})},

	watchBindings: {},
	schedulerSvc + "Schedule": {write: true, target: podOf(func(req any) *berthv1.Pod {
		return as[*berthv1.ScheduleRequest](req).GetPod()
	})},
	schedulerSvc + "Explain":      {target: explain},
	schedulerSvc + "ListReplicas": {target: clusterObject("replicas", func(any) string { return "all" })},
}

// as is a nil-safe conversion: the generated getters accept nil.
func as[T any](req any) T {
	t, _ := req.(T)
	return t
}

// openMethods need no credentials: probes and tooling must work before
// anyone is let in.
func openMethod(method string) bool {
	const health, reflectV1, reflectV1alpha = "/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"
	return strings.HasPrefix(method, health) || strings.HasPrefix(method, reflectV1) || strings.HasPrefix(method, reflectV1alpha)
}

// allows reports whether the role may call the method at all.
func (r Role) allows(ru rule, known bool) bool {
	switch {
	case r == RoleAdmin:
		return true
	case !known:
		return false
	case r == RoleOrchestrator:
		return true
	case r == RoleObserver:
		return !ru.write
	}
	return false
}
