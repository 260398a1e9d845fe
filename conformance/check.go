package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Checker runs scenarios through kube-scheduler and Berth and compares.
type Checker struct {
	// kube and berth hold one runner per entry of Profiles.
	kube  []*KubeRunner
	berth []*BerthRunner
	// Mutate perturbs kube's outcome before comparing, to show that each
	// comparison can fail; see Mutation.
	Mutate bool
	// Seen counts what kube's outcomes held, so a run shows what it
	// exercised: "feasible", "scored", and "Plugin/Code" per rejection.
	Seen map[string]int
}

// NewChecker sets up both schedulers once; scenarios then reuse them.
func NewChecker(ctx context.Context) (*Checker, error) {
	c := &Checker{}
	for i, prof := range Profiles {
		k, err := NewKubeRunner(ctx, prof)
		if err != nil {
			return nil, fmt.Errorf("profile %d: %w", i, err)
		}
		b, err := NewBerthRunner(ctx, prof)
		if err != nil {
			return nil, fmt.Errorf("profile %d: %w", i, err)
		}
		c.kube, c.berth = append(c.kube, k), append(c.berth, b)
	}
	return c, nil
}

// Check returns the disagreements on sc (none: they agree) and, in mutate
// mode, the mutation made to kube's side.
func (c *Checker) Check(ctx context.Context, sc *Scenario) ([]string, Mutation, error) {
	prof := sc.Profile % len(Profiles)
	k, err := c.kube[prof].Run(ctx, sc)
	if err != nil {
		return nil, "", err
	}
	b, err := c.berth[prof].Run(ctx, sc)
	if err != nil {
		return nil, "", err
	}
	c.count(k)
	var m Mutation
	if c.Mutate {
		m = mutate(k, sc.Seed)
	}
	return Diff(k, b), m, nil
}

func (c *Checker) count(o *Outcome) {
	if c.Seen == nil {
		c.Seen = map[string]int{}
	}
	c.Seen["preemption candidates"] += len(o.Candidates)
	if o.Nominated != "" {
		c.Seen["preemption nominations"]++
		if len(o.PreemptionBest) > 1 {
			c.Seen["nominations among ties"]++
		}
		if len(o.PreemptionBest) < len(o.Candidates) {
			c.Seen["nominations the rules narrowed"]++
		}
	}
	for _, n := range o.Nodes {
		switch {
		case len(n.Scores) > 0:
			c.Seen["scored"]++
		case n.Feasible:
			c.Seen["feasible"]++
		default:
			c.Seen[n.Plugin+"/"+n.Code]++
		}
	}
}

// Explain shrinks a disagreeing scenario and describes it: the
// disagreements on the smallest scenario found, then that scenario.
func (c *Checker) Explain(ctx context.Context, sc *Scenario) string {
	small := Shrink(sc, func(s *Scenario) bool {
		d, _, err := c.Check(ctx, s)
		return err != nil || len(d) > 0
	})
	d, _, err := c.Check(ctx, small)
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d disagrees (shrunk from %d nodes, %d pods to %d, %d):\n", sc.Seed, len(sc.Nodes), len(sc.Pods), len(small.Nodes), len(small.Pods))
	if err != nil {
		fmt.Fprintf(&b, "  error: %v\n", err)
	}
	for _, line := range d {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	fmt.Fprintf(&b, "under profile %d:\n%s", small.Profile, Profiles[small.Profile%len(Profiles)])
	b.WriteString(scenarioYAML(small))
	return b.String()
}

// scenarioYAML prints a scenario without the empty fields Kubernetes'
// types would otherwise spell out.
func scenarioYAML(sc *Scenario) string {
	j, err := json.Marshal(sc)
	if err != nil {
		return err.Error()
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return err.Error()
	}
	y, err := yaml.Marshal(pruned(v))
	if err != nil {
		return err.Error()
	}
	return string(y)
}

// pruned drops empty strings, zeros, empty maps and lists, recursively.
func pruned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e = pruned(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		var out []any
		for _, e := range x {
			if e = pruned(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	case float64:
		if x == 0 {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	}
	return v
}

// Mutation names a perturbation of kube's outcome.
type Mutation string

// The mutations, one per comparison Diff makes.
const (
	MutateScore       Mutation = "score"
	MutateFeasibility Mutation = "feasibility"
	MutateCode        Mutation = "code"
	MutatePlugin      Mutation = "plugin"
	MutateReason      Mutation = "reason"
	MutateBest        Mutation = "best"
	MutateVictims     Mutation = "victims"
	// MutateNominated moves kube's nomination to a candidate outside the
	// best, or off the candidates when all of them tie.
	MutateNominated        Mutation = "nominated"
	MutatePreemptionBest   Mutation = "preemption-best"
	MutateNominatedVictims Mutation = "nominated-victims"
)

var mutations = []Mutation{MutateScore, MutateFeasibility, MutateCode, MutatePlugin, MutateReason, MutateBest, MutateVictims,
	MutateNominated, MutatePreemptionBest, MutateNominatedVictims}

// mutate changes one thing in o, chosen from the seed among the
// mutations o has something for (feasibility always applies).
func mutate(o *Outcome, seed uint64) Mutation {
	r := rand.New(rand.NewPCG(seed, 99))
	names := make([]string, 0, len(o.Nodes))
	for n := range o.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	node := func(ok func(*NodeOutcome) bool) *NodeOutcome {
		var fit []*NodeOutcome
		for _, n := range names {
			if ok(o.Nodes[n]) {
				fit = append(fit, o.Nodes[n])
			}
		}
		if len(fit) == 0 {
			return nil
		}
		return fit[r.IntN(len(fit))]
	}
	start := r.IntN(len(mutations))
	for i := range mutations {
		switch m := mutations[(start+i)%len(mutations)]; m {
		case MutateScore:
			if n := node(func(n *NodeOutcome) bool { return len(n.Scores) > 0 }); n != nil {
				plugins := scoreNames(n.Scores, nil)
				n.Scores[plugins[r.IntN(len(plugins))]]++
				return m
			}
		case MutateFeasibility:
			n := o.Nodes[names[r.IntN(len(names))]]
			n.Feasible = !n.Feasible
			return m
		case MutateCode:
			if n := node(func(n *NodeOutcome) bool { return !n.Feasible }); n != nil {
				n.Code += "?"
				return m
			}
		case MutatePlugin:
			if n := node(func(n *NodeOutcome) bool { return !n.Feasible }); n != nil {
				n.Plugin += "?"
				return m
			}
		case MutateReason:
			if n := node(func(n *NodeOutcome) bool { return len(n.Reasons) > 0 }); n != nil {
				n.Reasons[r.IntN(len(n.Reasons))] += "?"
				return m
			}
		case MutateBest:
			if len(o.Best) > 0 {
				o.Best = o.Best[1:]
				return m
			}
		case MutateVictims:
			if len(o.Candidates) > 0 {
				nodes := scoreNames(toCount(o.Candidates), nil)
				n := nodes[r.IntN(len(nodes))]
				o.Candidates[n] = append(o.Candidates[n], "ns/extra-victim")
				return m
			}
		case MutateNominated:
			if o.Nominated != "" {
				o.Nominated = notBest(o)
				if o.Nominated == "" {
					o.Nominated = o.PreemptionBest[0] + "?"
				}
				return m
			}
		case MutatePreemptionBest:
			if len(o.PreemptionBest) > 0 {
				if n := notBest(o); n != "" {
					o.PreemptionBest = append(o.PreemptionBest, n)
				} else {
					o.PreemptionBest = o.PreemptionBest[1:]
				}
				return m
			}
		case MutateNominatedVictims:
			if o.Nominated != "" {
				o.NominatedVictims = append(o.NominatedVictims, "ns/extra-victim")
				return m
			}
		}
	}
	panic("unreachable: feasibility always applies")
}

// notBest is the first candidate (by name) outside o's best, "" if all tie.
func notBest(o *Outcome) string {
	for _, n := range scoreNames(toCount(o.Candidates), nil) {
		if !slices.Contains(o.PreemptionBest, n) {
			return n
		}
	}
	return ""
}
