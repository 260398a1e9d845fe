package conformance

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"
)

var (
	numScenarios = flag.Int("scenarios", 300, "scenarios to run")
	firstSeed    = flag.Uint64("seed", 1, "seed of the first scenario; the others follow it")
	mutateKube   = flag.Bool("mutate", false, "perturb kube's side of every scenario: every one must then disagree")
	maxReported  = flag.Int("max-reported", 5, "stop after this many disagreeing scenarios")
)

// TestConformance runs -scenarios scenarios from -seed through kube-scheduler's
// plugins and Berth's core; each disagreement is reported shrunk.
func TestConformance(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewChecker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Mutate = *mutateKube
	start := time.Now()
	failed := 0
	for i := range *numScenarios {
		sc := Generate(*firstSeed + uint64(i))
		d, _, err := c.Check(ctx, sc)
		if err != nil {
			t.Fatalf("seed %d: %v", sc.Seed, err)
		}
		if len(d) == 0 {
			continue
		}
		failed++
		t.Error(c.Explain(ctx, sc))
		if failed >= *maxReported {
			t.Fatalf("stopping after %d disagreeing scenarios of %d", failed, i+1)
		}
	}
	t.Logf("node outcomes seen on kube's side: %v", c.Seen)
	t.Logf("%d scenarios (seeds %d..%d) against kube-scheduler %s in %v, %d disagreeing",
		*numScenarios, *firstSeed, *firstSeed+uint64(*numScenarios)-1, KubeRelease, time.Since(start).Round(time.Millisecond), failed)
}

// TestMutateFindsDisagreements proves the comparison can fail: with
// kube's outcome perturbed, every scenario must disagree, and every kind
// of perturbation must have been tried and caught.
func TestMutateFindsDisagreements(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewChecker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Mutate = true
	caught := map[Mutation]int{}
	// Enough seeds that even preemption, which few scenarios reach, is
	// mutated a few times.
	for seed := uint64(1000); seed < 4000; seed++ {
		d, m, err := c.Check(ctx, Generate(seed))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(d) == 0 {
			t.Errorf("seed %d: mutation %q went unnoticed", seed, m)
			continue
		}
		caught[m]++
	}
	t.Logf("mutations caught: %v", caught)
	for _, m := range mutations {
		if caught[m] == 0 {
			t.Errorf("mutation %q never tried and caught; caught %v", m, caught)
		}
	}
}

// TestShrinkKeepsTheFailure checks the shrinker on a made-up failure:
// "some node has a taint" shrinks to one node holding only what is needed.
func TestShrinkKeepsTheFailure(t *testing.T) {
	var sc *Scenario
	for seed := uint64(1); sc == nil; seed++ {
		if s := Generate(seed); len(s.Nodes) > 3 && hasTaint(s) {
			sc = s
		}
	}
	small := Shrink(sc, hasTaint)
	if !hasTaint(small) || len(small.Nodes) != 1 || len(small.Pods) != 0 {
		t.Errorf("shrunk to %d nodes, %d pods, tainted %v; want 1 tainted node, no pods", len(small.Nodes), len(small.Pods), hasTaint(small))
	}
}

func hasTaint(s *Scenario) bool {
	for _, n := range s.Nodes {
		if len(n.Spec.Taints) > 0 {
			return true
		}
	}
	return false
}

func TestScenarioYAMLLeavesOutEmptyFields(t *testing.T) {
	y := scenarioYAML(Generate(7))
	for _, empty := range []string{"nodeInfo", "daemonEndpoints", `""`, "{}"} {
		if strings.Contains(y, empty) {
			t.Errorf("scenario YAML has %s:\n%s", empty, y)
		}
	}
}
