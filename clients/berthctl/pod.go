package main

import (
	"context"
	"fmt"
	"math"

	"github.com/spf13/pflag"

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

func (f *podSpecFlags) register(fs *pflag.FlagSet) {
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
func namespaceFlag(fs *pflag.FlagSet, def, usage string) *string {
	return fs.StringP("namespace", "n", def, usage)
}

func (c *cli) podSubmit(fs *pflag.FlagSet) runFunc {
	var spec podSpecFlags
	spec.register(fs)
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the pod (with -f: of pods that name none)")
	file := fs.StringP("filename", "f", "", "read pods from `FILE`: a YAML or JSON berth.v1.Pod, a list, or several YAML documents (- for stdin)")
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

// allNamespacesFlag registers -A. Lists already cover every namespace
// without -n; -A says so explicitly, as kubectl users type it.
func allNamespacesFlag(fs *pflag.FlagSet) *bool {
	return fs.BoolP("all-namespaces", "A", false, "list across all namespaces (the default without -n)")
}

// listNamespace is the namespace a list command covers, "" for all.
func listNamespace(fs *pflag.FlagSet, ns string, all bool) (string, error) {
	if all && fs.Changed("namespace") {
		return "", usageErrorf("-A and -n cannot be used together")
	}
	if all {
		return "", nil
	}
	return ns, nil
}

func (c *cli) podList(fs *pflag.FlagSet) runFunc {
	ns := namespaceFlag(fs, "", "only pods in `namespace` (default all)")
	all := allNamespacesFlag(fs)
	phase := fs.String("phase", "", "only pods in `phase`: pending, bound, unschedulable, running, succeeded or failed")
	node := fs.String("node", "", "only pods bound to `node`")
	limit := fs.Int("limit", 0, "show at most `N` pods, 0 for all")
	labels := fs.StringP("selector", "l", "", "only pods whose labels match, e.g. app=web,tier!=db or 'env in (a,b)'")
	return func(ctx context.Context, args []string) error {
		filter := berth.PodFilter{NodeName: *node}
		var sel selector
		check := func() error {
			if err := wantArgs(args); err != nil {
				return err
			}
			var err error
			if filter.Namespace, err = listNamespace(fs, *ns, *all); err != nil {
				return err
			}
			if filter.Phase, err = parsePhase(*phase); err != nil {
				return usageError{err.Error()}
			}
			if sel, err = parseSelector(*labels); err != nil {
				return usageError{err.Error()}
			}
			// Without a selector the server may stop after a short page.
			if *limit > 0 && *limit < 500 && sel == nil {
				filter.PageSize = int32(*limit)
			}
			return nil
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			pods, err := collect(filterSeq(client.AllPods(ctx, filter), sel), *limit)
			if err != nil {
				return err
			}
			switch {
			case p.structured():
				return list(p, pods)
			case p.wide():
				return podWideTable(c.stdout, pods)
			}
			return podTable(c.stdout, pods)
		})
	}
}

func (c *cli) podGet(fs *pflag.FlagSet) runFunc {
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

func (c *cli) podDelete(fs *pflag.FlagSet) runFunc {
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the pod, or of the pods to delete with -l or --all")
	uid := fs.String("uid", "", "delete only if the pod has this `uid`")
	labels := fs.StringP("selector", "l", "", "delete the pods of the namespace whose labels match, e.g. app=web")
	all := fs.Bool("all", false, "delete every pod of the namespace")
	return func(ctx context.Context, args []string) error {
		if *labels == "" && !*all {
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
		var sel selector
		check := func() (err error) {
			switch {
			case len(args) > 0:
				return usageErrorf("give NAME, -l or --all, not more than one")
			case *labels != "" && *all:
				return usageErrorf("-l and --all cannot be used together")
			case *uid != "":
				return usageErrorf("--uid names one pod: give NAME")
			}
			if sel, err = parseSelector(*labels); err != nil {
				return usageError{err.Error()}
			}
			return nil
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			return c.deleteMatching(ctx, p, client, *ns, sel)
		})
	}
}

// deleteMatching deletes the pods of namespace whose labels match sel, each
// by its uid so that a pod replaced since the listing is left alone.
func (c *cli) deleteMatching(ctx context.Context, p printer, client *berth.Client, namespace string, sel selector) error {
	pods, err := collect(filterSeq(client.AllPods(ctx, berth.PodFilter{Namespace: namespace}), sel), 0)
	if err != nil {
		return err
	}
	if len(pods) == 0 && !p.structured() {
		fmt.Fprintf(c.stderr, "no pods to delete in namespace %s\n", namespace)
		return nil
	}
	var done []*berthv1.DeletePodResponse
	var failed int
	for _, pod := range pods {
		rev, err := client.DeletePod(ctx, pod.GetNamespace(), pod.GetName(), pod.GetUid())
		if err != nil {
			failed++
			fmt.Fprintf(c.stderr, "pod/%s/%s: ", pod.GetNamespace(), pod.GetName())
			printError(c.stderr, err)
			continue
		}
		done = append(done, &berthv1.DeletePodResponse{Revision: rev})
		if !p.structured() {
			fmt.Fprintf(c.stdout, "pod/%s/%s deleted (revision %d)\n", pod.GetNamespace(), pod.GetName(), rev)
		}
	}
	if p.structured() {
		if err := list(p, done); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d pods were not deleted", failed, len(pods))
	}
	return nil
}
