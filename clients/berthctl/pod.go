package main

import (
	"context"
	"flag"
	"fmt"
	"math"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

const defaultNamespace = "default"

// podSpecFlags are the flags that describe a pod for "pod submit". The pod
// gets one container, named "main", that carries the requests.
type podSpecFlags struct {
	cpu, memory, image, node, podGroup        string
	priority                                  int
	labels, selectors, tolerations, resources listFlag
}

// podSpecFlagNames are the flags that conflict with -f.
var podSpecFlagNames = []string{"cpu", "memory", "image", "node", "pod-group", "priority", "label", "node-selector", "toleration", "resource"}

func (f *podSpecFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cpu, "cpu", "", "cpu request: cores (\"2\") or millicores (\"500m\")")
	fs.StringVar(&f.memory, "memory", "", "memory request, e.g. 1Gi")
	fs.StringVar(&f.image, "image", "", "container image (used for image locality)")
	fs.StringVar(&f.node, "node", "", "declare the pod already running on this `node` (no scheduling)")
	fs.StringVar(&f.podGroup, "pod-group", "", "pod `group` (gang) the pod belongs to")
	fs.IntVar(&f.priority, "priority", 0, "scheduling priority; higher goes first and may preempt")
	fs.Var(&f.labels, "label", "label `key=value` (repeatable)")
	fs.Var(&f.selectors, "node-selector", "node label `key=value` the node must have (repeatable)")
	fs.Var(&f.tolerations, "toleration", "toleration `key=value:Effect`, key=value, key:Effect or key (repeatable)")
	fs.Var(&f.resources, "resource", "extended resource request `name=quantity`, e.g. example.com/gpu=1 (repeatable)")
}

// build turns the flags into the pod to submit.
func (f *podSpecFlags) build(namespace, name string) (*berthv1.Pod, error) {
	if f.priority < math.MinInt32 || f.priority > math.MaxInt32 {
		return nil, usageErrorf("--priority %d is out of range", f.priority)
	}
	ctr := &berthv1.Container{Name: "main", Image: f.image, Requests: map[string]int64{}}
	for _, q := range []struct{ resource, value string }{{"cpu", f.cpu}, {"memory", f.memory}} {
		if q.value == "" {
			continue
		}
		v, err := parseQuantity(q.resource, q.value)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		ctr.Requests[q.resource] = v
	}
	if err := parseResources(f.resources, ctr.Requests); err != nil {
		return nil, usageError{err.Error()}
	}
	if len(ctr.Requests) == 0 {
		ctr.Requests = nil
	}
	p := &berthv1.Pod{
		Namespace:  namespace,
		Name:       name,
		Priority:   int32(f.priority),
		Containers: []*berthv1.Container{ctr},
		NodeName:   f.node,
		PodGroup:   f.podGroup,
	}
	var err error
	if p.Labels, err = parseKeyValues("label", f.labels); err != nil {
		return nil, usageError{err.Error()}
	}
	if p.NodeSelector, err = parseKeyValues("node selector", f.selectors); err != nil {
		return nil, usageError{err.Error()}
	}
	for _, s := range f.tolerations {
		t, err := parseToleration(s)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		p.Tolerations = append(p.Tolerations, t)
	}
	return p, nil
}

// namespaceFlag registers -n and --namespace on one variable.
func namespaceFlag(fs *flag.FlagSet, def, usage string) *string {
	ns := fs.String("namespace", def, usage)
	fs.StringVar(ns, "n", def, "short for --namespace")
	return ns
}

func (c *cli) podSubmit(fs *flag.FlagSet) runFunc {
	var spec podSpecFlags
	spec.register(fs)
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the pod (with -f: of pods that name none)")
	file := fs.String("f", "", "read pods from `FILE`: a YAML or JSON berth.v1.Pod, a list, or several YAML documents (- for stdin)")
	return func(ctx context.Context, args []string) error {
		var pods []*berthv1.Pod
		check := func() (err error) {
			pods, err = specsFromFileOrFlags(c, fs, *file, podSpecFlagNames, args,
				func() *berthv1.Pod { return new(berthv1.Pod) },
				func(name string) (*berthv1.Pod, error) { return spec.build(*ns, name) })
			for _, pod := range pods {
				if pod.Namespace == "" {
					pod.Namespace = *ns
				}
			}
			return err
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			if len(pods) != 1 {
				return c.submitMany(ctx, p, client, pods)
			}
			stored, rev, err := client.SubmitPod(ctx, pods[0])
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(&berthv1.SubmitPodResponse{Pod: stored, Revision: rev})
			}
			fmt.Fprintf(c.stdout, "pod/%s/%s submitted (uid %s, revision %d)\n", stored.GetNamespace(), stored.GetName(), stored.GetUid(), rev)
			return nil
		})
	}
}

// submitMany submits pods in batches and reports each pod's outcome; it
// fails if any pod failed.
func (c *cli) submitMany(ctx context.Context, p printer, client *berth.Client, pods []*berthv1.Pod) error {
	results, err := client.SubmitPods(ctx, pods)
	failed := 0
	for i, r := range results {
		ref := pods[i].GetNamespace() + "/" + pods[i].GetName()
		if rerr := berth.SubmitPodResultErr(r); rerr != nil {
			failed++
			fmt.Fprintf(c.stderr, "pod/%s: ", ref)
			printError(c.stderr, rerr)
			continue
		}
		if !p.structured() {
			fmt.Fprintf(c.stdout, "pod/%s submitted (uid %s, revision %d)\n", ref, r.GetPod().GetUid(), r.GetRevision())
		}
	}
	if p.structured() && len(results) > 0 {
		if perr := list(p, results); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d pods were not submitted", failed, len(pods))
	}
	return nil
}

func (c *cli) podList(fs *flag.FlagSet) runFunc {
	ns := namespaceFlag(fs, "", "only pods in `namespace` (default all)")
	phase := fs.String("phase", "", "only pods in `phase`: pending, bound, unschedulable, running, succeeded or failed")
	node := fs.String("node", "", "only pods bound to `node`")
	limit := fs.Int("limit", 0, "show at most `N` pods, 0 for all")
	return func(ctx context.Context, args []string) error {
		filter := berth.PodFilter{Namespace: *ns, NodeName: *node}
		if *limit > 0 && *limit < 500 {
			filter.PageSize = int32(*limit)
		}
		check := func() error {
			if err := wantArgs(args); err != nil {
				return err
			}
			var err error
			if filter.Phase, err = parsePhase(*phase); err != nil {
				return usageError{err.Error()}
			}
			return nil
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			pods, err := collect(client.AllPods(ctx, filter), *limit)
			if err != nil {
				return err
			}
			if p.structured() {
				return list(p, pods)
			}
			return podTable(c.stdout, pods)
		})
	}
}

func (c *cli) podGet(fs *flag.FlagSet) runFunc {
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the pod")
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			pod, err := client.GetPod(ctx, *ns, name)
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(pod)
			}
			return podDetail(c.stdout, pod)
		})
	}
}

func (c *cli) podDelete(fs *flag.FlagSet) runFunc {
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the pod")
	uid := fs.String("uid", "", "delete only if the pod has this `uid`")
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			rev, err := client.DeletePod(ctx, *ns, name, *uid)
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(&berthv1.DeletePodResponse{Revision: rev})
			}
			fmt.Fprintf(c.stdout, "pod/%s/%s deleted (revision %d)\n", *ns, name, rev)
			return nil
		})
	}
}
