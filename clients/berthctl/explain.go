package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// explain dry-runs a stored pending pod (by name) or a pod from a file.
func (c *cli) explain(fs *pflag.FlagSet) runFunc {
	ns := namespaceFlag(fs, defaultNamespace, "`namespace` of the stored pod")
	file := fs.StringP("filename", "f", "", "explain the pod in `FILE` (YAML or JSON berth.v1.Pod; - for stdin) instead of a stored one")
	return func(ctx context.Context, args []string) error {
		req := &berthv1.ExplainRequest{}
		check := func() error {
			switch {
			case *file != "" && len(args) == 0:
				pods, err := readMessages(*file, c.stdin, func() *berthv1.Pod { return new(berthv1.Pod) })
				if err != nil {
					return err
				}
				if len(pods) != 1 {
					return usageError{fmt.Sprintf("explain takes one pod, %s holds %d", *file, len(pods))}
				}
				if pods[0].GetNamespace() == "" {
					pods[0].Namespace = *ns
				}
				req.Target = &berthv1.ExplainRequest_Pod{Pod: pods[0]}
			case *file == "":
				if err := wantArgs(args, "NAME"); err != nil {
					return err
				}
				req.Target = &berthv1.ExplainRequest_Existing{Existing: &berthv1.PodReference{Namespace: *ns, Name: args[0]}}
			default:
				return usageError{"give a pod NAME or -f FILE, not both"}
			}
			return nil
		}
		return c.connect(ctx, check, func(p printer, client *berth.Client) error {
			resp, err := client.SchedulerService().Explain(ctx, req)
			if err != nil {
				return err
			}
			if p.structured() {
				return p.object(resp)
			}
			return explainTable(c.stdout, resp)
		})
	}
}

// explainTable prints one row per node: its verdict, each score plugin's
// normalized score, and the weighted total; then the choice.
func explainTable(w io.Writer, ex *berthv1.ExplainResponse) error {
	var plugins []string
	for _, n := range ex.GetNodes() {
		for _, s := range n.GetScores() {
			if !slices.Contains(plugins, s.GetPlugin()) {
				plugins = append(plugins, s.GetPlugin())
			}
		}
	}
	slices.Sort(plugins)
	tw := newTable(w)
	fmt.Fprint(tw, "NODE\tRESULT")
	for _, pl := range plugins {
		fmt.Fprintf(tw, "\t%s", pl)
	}
	fmt.Fprint(tw, "\tTOTAL\n")
	for _, n := range ex.GetNodes() {
		result := "fits"
		if !n.GetFeasible() {
			result = fmt.Sprintf("%s: %s", n.GetPlugin(), strings.Join(n.GetReasons(), "; "))
		}
		if n.GetNodeName() == ex.GetChosenNodeName() {
			result += " (chosen)"
		}
		fmt.Fprintf(tw, "%s\t%s", n.GetNodeName(), result)
		scores := map[string]int64{}
		for _, s := range n.GetScores() {
			scores[s.GetPlugin()] = s.GetScore()
		}
		for _, pl := range plugins {
			if s, ok := scores[pl]; ok {
				fmt.Fprintf(tw, "\t%d", s)
			} else {
				fmt.Fprint(tw, "\t-")
			}
		}
		if n.GetFeasible() {
			fmt.Fprintf(tw, "\t%d\n", n.GetTotalScore())
		} else {
			fmt.Fprint(tw, "\t-\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	switch {
	case ex.GetChosenNodeName() != "":
		fmt.Fprintf(w, "Chosen: %s", ex.GetChosenNodeName())
		if len(ex.GetTiedNodeNames()) > 1 {
			fmt.Fprintf(w, " (tie-break among %s)", strings.Join(ex.GetTiedNodeNames(), ", "))
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "No node fits: %s\n", ex.GetMessage())
		if pp := ex.GetPreemption(); pp != nil {
			if pp.GetNodeName() == "" {
				fmt.Fprintf(w, "Preemption cannot help: %s\n", pp.GetMessage())
			} else {
				var victims []string
				for _, v := range pp.GetVictims() {
					victims = append(victims, v.GetNamespace()+"/"+v.GetName())
				}
				fmt.Fprintf(w, "Preemption would nominate %s, evicting %s\n", pp.GetNodeName(), strings.Join(victims, ", "))
			}
		}
	}
	fmt.Fprintln(w, "Scores are normalized (0-100) before weights; TOTAL is weighted.")
	return nil
}
