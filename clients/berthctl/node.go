package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/spf13/pflag"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// nodeSpecFlags are the flags that describe a node for "node add".
type nodeSpecFlags struct {
	cpu, memory, ephemeralStorage, pods string
	labels, taints, resources           listFlag
	unschedulable                       bool
	leaseTTL                            time.Duration
}

// nodeSpecFlagNames are the flags that conflict with -f.
var nodeSpecFlagNames = []string{"cpu", "memory", "ephemeral-storage", "pods", "label", "taint", "resource", "unschedulable", "lease-ttl"}

func (f *nodeSpecFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cpu, "cpu", "", "allocatable cpu: cores (\"4\") or millicores (\"3500m\")")
	fs.StringVar(&f.memory, "memory", "", "allocatable memory, e.g. 8Gi")
	fs.StringVar(&f.ephemeralStorage, "ephemeral-storage", "", "allocatable ephemeral storage, e.g. 100Gi")
	fs.StringVar(&f.pods, "pods", "110", "most pods the node runs")
	fs.Var(&f.labels, "label", "label `key=value` (repeatable)")
	fs.Var(&f.taints, "taint", "taint `key=value:Effect` or key:Effect, Effect one of NoSchedule, PreferNoSchedule, NoExecute (repeatable)")
	fs.Var(&f.resources, "resource", "extended resource `name=quantity`, e.g. example.com/gpu=2 (repeatable)")
	fs.BoolVar(&f.unschedulable, "unschedulable", false, "place no new pods on the node (cordon)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 0, "give the node a lease of this `duration` (whole seconds), to be kept alive with \"node renew\"; 0 for none")
}

// build turns the flags into the node to store.
func (f *nodeSpecFlags) build(name string) (*berthv1.Node, error) {
	if f.leaseTTL < 0 || f.leaseTTL%time.Second != 0 {
		return nil, usageErrorf("--lease-ttl must be a whole number of seconds, got %v", f.leaseTTL)
	}
	n := &berthv1.Node{Name: name, Unschedulable: f.unschedulable, Allocatable: map[string]int64{},
		LeaseTtlSeconds: int32(min(f.leaseTTL/time.Second, math.MaxInt32))}
	for _, q := range []struct{ resource, value string }{
		{"cpu", f.cpu}, {"memory", f.memory}, {"ephemeral-storage", f.ephemeralStorage}, {"pods", f.pods},
	} {
		if q.value == "" {
			continue
		}
		v, err := parseQuantity(q.resource, q.value)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		n.Allocatable[q.resource] = v
	}
	if err := parseResources(f.resources, n.Allocatable); err != nil {
		return nil, usageError{err.Error()}
	}
	labels, err := parseKeyValues("label", f.labels)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	n.Labels = labels
	for _, s := range f.taints {
		t, err := parseTaint(s)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		n.Taints = append(n.Taints, t)
	}
	return n, nil
}

func (c *cli) nodeAdd(fs *pflag.FlagSet) runFunc {
	var spec nodeSpecFlags
	spec.register(fs)
	file := fs.StringP("filename", "f", "", "read nodes from `FILE`: a YAML or JSON berth.v1.Node, a list, or several YAML documents (- for stdin)")
	return func(ctx context.Context, args []string) error {
		var nodes []*berthv1.Node
		check := func() (err error) {
			nodes, err = specsFromFileOrFlags(c, fs, *file, nodeSpecFlagNames, args,
				func() *berthv1.Node { return new(berthv1.Node) }, spec.build)
			return err
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			return applyEach(c, p, "node", nodes, func(n *berthv1.Node) (*berthv1.UpsertNodeResponse, string, error) {
				stored, rev, err := client.UpsertNode(ctx, n)
				if err != nil {
					return nil, "", err
				}
				return &berthv1.UpsertNodeResponse{Node: stored, Revision: rev},
					fmt.Sprintf("node/%s upserted (revision %d)", stored.GetName(), rev), nil
			})
		})
	}
}

// conflictsWithFile rejects spec flags given together with -f.
func conflictsWithFile(fs *pflag.FlagSet, specFlags []string) error {
	set := setFlags(fs)
	for _, name := range specFlags {
		if set[name] {
			return usageErrorf("--%s cannot be used with -f", name)
		}
	}
	return nil
}

func (c *cli) nodeList(fs *pflag.FlagSet) runFunc {
	limit := fs.Int("limit", 0, "show at most `N` nodes, 0 for all")
	labels := fs.StringP("selector", "l", "", "only nodes whose labels match, e.g. zone=a,disk!=hdd or 'zone in (a,b)'")
	return func(ctx context.Context, args []string) error {
		var sel selector
		check := func() (err error) {
			if err = wantArgs(args); err != nil {
				return err
			}
			if sel, err = parseSelector(*labels); err != nil {
				return usageError{err.Error()}
			}
			return nil
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			// With a selector, --limit counts the nodes that match.
			nodes, err := collect(filterSeq(client.AllNodes(ctx), sel), *limit)
			if err != nil {
				return err
			}
			switch {
			case p.structured():
				return list(p, nodes)
			case p.wide():
				return nodeWideTable(c.stdout, nodes)
			}
			return nodeTable(c.stdout, nodes)
		})
	}
}

func (c *cli) nodeGet(fs *pflag.FlagSet) runFunc {
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			node, usage, err := client.GetNode(ctx, name)
			if err != nil {
				return err
			}
			if p.structured() {
				// The response, not just the node, so the usage is kept.
				return p.object(&berthv1.GetNodeResponse{Node: node, Usage: usage})
			}
			return nodeDetail(c.stdout, node, usage)
		})
	}
}

func (c *cli) nodeDelete(fs *pflag.FlagSet) runFunc {
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			rev, err := client.DeleteNode(ctx, name)
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(&berthv1.DeleteNodeResponse{Revision: rev})
			}
			fmt.Fprintf(c.stdout, "node/%s deleted (revision %d)\n", name, rev)
			return nil
		})
	}
}
