package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// podGroupSpecFlags describe a pod group for "podgroup apply".
type podGroupSpecFlags struct {
	minMember int
	timeout   time.Duration
}

// podGroupSpecFlagNames are the flags that conflict with -f.
var podGroupSpecFlagNames = []string{"min-member", "schedule-timeout"}

func (f *podGroupSpecFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.minMember, "min-member", 1, "members that must fit before any is bound")
	fs.DurationVar(&f.timeout, "schedule-timeout", 0, "how long placed members wait for the rest, 0 for the server's default (60s)")
}

// build turns the flags into the group to store.
func (f *podGroupSpecFlags) build(namespace, name string) (*berthv1.PodGroup, error) {
	if f.minMember < 1 || f.minMember > math.MaxInt32 {
		return nil, usageErrorf("--min-member %d is out of range", f.minMember)
	}
	if f.timeout < 0 {
		return nil, usageErrorf("--schedule-timeout %v is negative", f.timeout)
	}
	g := &berthv1.PodGroup{Namespace: namespace, Name: name, MinMember: int32(f.minMember)}
	if f.timeout > 0 {
		g.ScheduleTimeout = durationpb.New(f.timeout)
	}
	return g, nil
}

func (c *cli) podGroupApply(fs *pflag.FlagSet) runFunc {
	var spec podGroupSpecFlags
	spec.register(fs)
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the group (with -f: of groups that name none)")
	file := fs.StringP("filename", "f", "", "read groups from `FILE`: a YAML or JSON berth.v1.PodGroup, a list, or several YAML documents (- for stdin)")
	return func(ctx context.Context, args []string) error {
		var groups []*berthv1.PodGroup
		check := func() (err error) {
			groups, err = specsFromFileOrFlags(c, fs, *file, podGroupSpecFlagNames, args,
				func() *berthv1.PodGroup { return new(berthv1.PodGroup) },
				func(name string) (*berthv1.PodGroup, error) { return spec.build(*ns, name) })
			for _, g := range groups {
				if g.Namespace == "" {
					g.Namespace = *ns
				}
			}
			return err
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			return applyEach(c, p, "pod group", groups, func(g *berthv1.PodGroup) (*berthv1.UpsertPodGroupResponse, string, error) {
				resp, err := client.PodService().UpsertPodGroup(ctx, &berthv1.UpsertPodGroupRequest{PodGroup: g})
				if err != nil {
					return nil, "", err
				}
				return resp, fmt.Sprintf("podgroup/%s/%s applied (revision %d)",
					resp.GetPodGroup().GetNamespace(), resp.GetPodGroup().GetName(), resp.GetRevision()), nil
			})
		})
	}
}

func (c *cli) podGroupGet(fs *pflag.FlagSet) runFunc {
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the group")
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			resp, err := client.PodService().GetPodGroup(ctx, &berthv1.GetPodGroupRequest{Namespace: *ns, Name: name})
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(resp)
			}
			return podGroupDetail(c.stdout, resp)
		})
	}
}

func (c *cli) podGroupList(fs *pflag.FlagSet) runFunc {
	ns := namespaceFlag(fs, "", "only groups in `namespace` (default all)")
	all := allNamespacesFlag(fs)
	return func(ctx context.Context, args []string) error {
		var namespace string
		check := func() (err error) {
			if err = wantArgs(args); err != nil {
				return err
			}
			namespace, err = listNamespace(fs, *ns, *all)
			return err
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			resp, err := client.PodService().ListPodGroups(ctx, &berthv1.ListPodGroupsRequest{Namespace: namespace})
			if err != nil {
				return err
			}
			if p.structured() {
				return list(p, resp.GetPodGroups())
			}
			return podGroupTable(c.stdout, resp.GetPodGroups())
		})
	}
}

func (c *cli) podGroupDelete(fs *pflag.FlagSet) runFunc {
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the group")
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			resp, err := client.PodService().DeletePodGroup(ctx, &berthv1.DeletePodGroupRequest{Namespace: *ns, Name: name})
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(resp)
			}
			fmt.Fprintf(c.stdout, "podgroup/%s/%s deleted (revision %d)\n", *ns, name, resp.GetRevision())
			return nil
		})
	}
}

func podGroupTable(w io.Writer, groups []*berthv1.PodGroup) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tMIN MEMBER\tSCHEDULE TIMEOUT")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\n", g.GetNamespace(), g.GetName(), g.GetMinMember(), g.GetScheduleTimeout().AsDuration())
	}
	return tw.Flush()
}

// podGroupDetail describes one group and how far its members got.
func podGroupDetail(w io.Writer, resp *berthv1.GetPodGroupResponse) error {
	g := resp.GetPodGroup()
	tw := newTable(w)
	fmt.Fprintf(tw, "Namespace:\t%s\n", g.GetNamespace())
	fmt.Fprintf(tw, "Name:\t%s\n", g.GetName())
	fmt.Fprintf(tw, "Min Member:\t%d\n", g.GetMinMember())
	fmt.Fprintf(tw, "Schedule Timeout:\t%v\n", g.GetScheduleTimeout().AsDuration())
	fmt.Fprintf(tw, "Members:\t%d\n", resp.GetMembers())
	fmt.Fprintf(tw, "Bound:\t%d\n", resp.GetBound())
	return tw.Flush()
}
