package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// The orchestrator's reports, for operators standing in for one: "pod
// confirm", "pod reject", "pod complete" and "node renew".

// podReportFlags are the flags every pod report takes.
type podReportFlags struct {
	namespace *string
	uid       *string
}

func (f *podReportFlags) register(fs *pflag.FlagSet) {
	f.namespace = namespaceFlag(fs, defaultNamespace, "`namespace` of the pod")
	f.uid = fs.String("uid", "", "report about the pod with this `uid` only (default: whatever pod has the name now)")
}

// resolveUID returns --uid, or the uid of the pod stored under the name:
// the RPCs insist on one, so that a late report cannot touch a newer pod.
func (f *podReportFlags) resolveUID(ctx context.Context, client *berth.Client, name string) (string, error) {
	if *f.uid != "" {
		return *f.uid, nil
	}
	pod, err := client.GetPod(ctx, *f.namespace, name)
	if err != nil {
		return "", err
	}
	return pod.GetUid(), nil
}

// podReport runs one report command: dial, resolve the uid, call, print.
func (c *cli) podReport(ctx context.Context, args []string, f *podReportFlags,
	call func(ctx context.Context, client *berth.Client, name, uid string) (proto.Message, string, error)) error {
	return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
		uid, err := f.resolveUID(ctx, client, name)
		if err != nil {
			return err
		}
		resp, line, err := call(ctx, client, name, uid)
		if err != nil {
			return err
		}
		if p.structured() {
			return p.object(resp)
		}
		fmt.Fprintf(c.stdout, "pod/%s/%s %s\n", *f.namespace, name, line)
		return nil
	})
}

func (c *cli) podConfirm(fs *pflag.FlagSet) runFunc {
	var f podReportFlags
	f.register(fs)
	node := fs.String("node", "", "the `node` the pod started on; must be the pod's node")
	return func(ctx context.Context, args []string) error {
		return c.podReport(ctx, args, &f, func(ctx context.Context, client *berth.Client, name, uid string) (proto.Message, string, error) {
			pod, rev, err := client.ConfirmBinding(ctx, *f.namespace, name, uid, *node)
			if err != nil {
				return nil, "", err
			}
			return &berthv1.ConfirmBindingResponse{Pod: pod, Revision: rev},
				fmt.Sprintf("running on %s (revision %d)", pod.GetNodeName(), rev), nil
		})
	}
}

func (c *cli) podReject(fs *pflag.FlagSet) runFunc {
	var f podReportFlags
	f.register(fs)
	node := fs.String("node", "", "the `node` that could not start the pod; must be the pod's node")
	reason := fs.String("reason", "", "why the node could not start the pod")
	return func(ctx context.Context, args []string) error {
		return c.podReport(ctx, args, &f, func(ctx context.Context, client *berth.Client, name, uid string) (proto.Message, string, error) {
			pod, rev, err := client.RejectBinding(ctx, *f.namespace, name, uid, *node, *reason)
			if err != nil {
				return nil, "", err
			}
			by := *node
			if rs := pod.GetStatus().GetRejections(); len(rs) > 0 {
				by = rs[len(rs)-1].GetNodeName()
			}
			return &berthv1.RejectBindingResponse{Pod: pod, Revision: rev},
				fmt.Sprintf("rejected by %s, pending again (revision %d)", by, rev), nil
		})
	}
}

func (c *cli) podComplete(fs *pflag.FlagSet) runFunc {
	var f podReportFlags
	f.register(fs)
	phase := fs.String("phase", "", "how the pod ended: succeeded or failed (required)")
	message := fs.String("message", "", "explanation kept in the pod's status")
	return func(ctx context.Context, args []string) error {
		ph, err := parsePhase(*phase)
		if err != nil || (ph != berthv1.PodPhase_POD_PHASE_SUCCEEDED && ph != berthv1.PodPhase_POD_PHASE_FAILED) {
			return usageErrorf("--phase must be succeeded or failed, got %q", *phase)
		}
		return c.podReport(ctx, args, &f, func(ctx context.Context, client *berth.Client, name, uid string) (proto.Message, string, error) {
			pod, rev, err := client.CompletePod(ctx, *f.namespace, name, uid, ph, *message)
			if err != nil {
				return nil, "", err
			}
			return &berthv1.CompletePodResponse{Pod: pod, Revision: rev},
				fmt.Sprintf("%s (revision %d)", strings.ToLower(phaseName(pod.GetStatus().GetPhase())), rev), nil
		})
	}
}

func (c *cli) nodeRenew(fs *pflag.FlagSet) runFunc {
	return func(ctx context.Context, args []string) error {
		return c.onNamed(ctx, args, func(p printer, client *berth.Client, name string) error {
			ttl, restored, err := client.RenewNodeLease(ctx, name)
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(&berthv1.RenewNodeLeaseResponse{TtlSeconds: ttl, Restored: restored})
			}
			what := "renewed"
			if restored {
				what = "restored (it had expired)"
			}
			fmt.Fprintf(c.stdout, "node/%s lease %s for %ds\n", name, what, ttl)
			return nil
		})
	}
}
