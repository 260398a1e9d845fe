package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// nameLister lists the names of stored objects for shell completion; ns is
// the command's --namespace, if it has one.
type nameLister func(ctx context.Context, client *berth.Client, ns string) ([]string, error)

// completionTimeout bounds the server call behind a <TAB>: a shell waiting
// on an unreachable server is worse than no completion.
const completionTimeout = 2 * time.Second

// completeNames completes the NAME argument from the server's objects.
func (c *cli) completeNames(names nameLister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, _ := cmd.Flags().GetString("namespace")
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		client, err := c.dial(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		defer client.Close()
		all, err := names(ctx, client, ns)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, n := range all {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func nodeNames(ctx context.Context, client *berth.Client, _ string) ([]string, error) {
	nodes, err := collect(client.AllNodes(ctx), 0)
	return namesOf(nodes), err
}

func podNames(ctx context.Context, client *berth.Client, ns string) ([]string, error) {
	pods, err := collect(client.AllPods(ctx, berth.PodFilter{Namespace: ns}), 0)
	return namesOf(pods), err
}

func podGroupNames(ctx context.Context, client *berth.Client, ns string) ([]string, error) {
	resp, err := client.PodService().ListPodGroups(ctx, &berthv1.ListPodGroupsRequest{Namespace: ns})
	return namesOf(resp.GetPodGroups()), err
}

func namesOf[T interface{ GetName() string }](items []T) []string {
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.GetName())
	}
	return names
}
