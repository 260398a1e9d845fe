package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// listFlag collects every value of a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
func (l *listFlag) Type() string       { return "strings" }

var _ pflag.Value = (*listFlag)(nil)

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *pflag.FlagSet) map[string]bool {
	set := make(map[string]bool)
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	return set
}

// parseKeyValues turns "k=v" flag values into a map; nil when there are none.
func parseKeyValues(what string, values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(values))
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid %s %q: want key=value", what, kv)
		}
		m[k] = v
	}
	return m, nil
}

// parseResources turns "name=quantity" flag values into amounts.
func parseResources(values []string, into map[string]int64) error {
	for _, kv := range values {
		name, q, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("invalid resource %q: want name=quantity, e.g. example.com/gpu=2", kv)
		}
		v, err := parseQuantity(name, q)
		if err != nil {
			return err
		}
		into[name] = v
	}
	return nil
}

// Short names of taint effects, as kubectl writes them.
var effectNames = map[berthv1.TaintEffect]string{
	berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE:        "NoSchedule",
	berthv1.TaintEffect_TAINT_EFFECT_PREFER_NO_SCHEDULE: "PreferNoSchedule",
	berthv1.TaintEffect_TAINT_EFFECT_NO_EXECUTE:         "NoExecute",
}

// parseEffect accepts the short name ("NoSchedule", any case) or the proto
// name ("TAINT_EFFECT_NO_SCHEDULE").
func parseEffect(s string) (berthv1.TaintEffect, error) {
	for e, short := range effectNames {
		if strings.EqualFold(s, short) || s == e.String() {
			return e, nil
		}
	}
	return 0, fmt.Errorf("invalid taint effect %q: want NoSchedule, PreferNoSchedule or NoExecute", s)
}

func effectName(e berthv1.TaintEffect) string {
	if s, ok := effectNames[e]; ok {
		return s
	}
	return e.String()
}

// parseTaint parses "key=value:Effect" or "key:Effect".
func parseTaint(s string) (*berthv1.Taint, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return nil, fmt.Errorf("invalid taint %q: want key=value:Effect or key:Effect", s)
	}
	effect, err := parseEffect(s[i+1:])
	if err != nil {
		return nil, fmt.Errorf("invalid taint %q: %w", s, err)
	}
	key, value, _ := strings.Cut(s[:i], "=")
	if key == "" {
		return nil, fmt.Errorf("invalid taint %q: empty key", s)
	}
	return &berthv1.Taint{Key: key, Value: value, Effect: effect}, nil
}

// parseToleration parses "key=value[:Effect]" (operator Equal) or
// "key[:Effect]" (operator Exists). Without an effect it matches them all.
func parseToleration(s string) (*berthv1.Toleration, error) {
	spec, effectStr, hasEffect := s, "", false
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		spec, effectStr, hasEffect = s[:i], s[i+1:], true
	}
	t := &berthv1.Toleration{Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS}
	if hasEffect {
		e, err := parseEffect(effectStr)
		if err != nil {
			return nil, fmt.Errorf("invalid toleration %q: %w", s, err)
		}
		t.Effect = e
	}
	key, value, hasValue := strings.Cut(spec, "=")
	if key == "" {
		return nil, fmt.Errorf("invalid toleration %q: want key=value:Effect, key:Effect or key", s)
	}
	t.Key = key
	if hasValue {
		t.Operator, t.Value = berthv1.TolerationOperator_TOLERATION_OPERATOR_EQUAL, value
	}
	return t, nil
}

// Short names of pod phases, for flags and tables.
var phaseNames = map[berthv1.PodPhase]string{
	berthv1.PodPhase_POD_PHASE_PENDING:       "Pending",
	berthv1.PodPhase_POD_PHASE_BOUND:         "Bound",
	berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE: "Unschedulable",
	berthv1.PodPhase_POD_PHASE_RUNNING:       "Running",
	berthv1.PodPhase_POD_PHASE_SUCCEEDED:     "Succeeded",
	berthv1.PodPhase_POD_PHASE_FAILED:        "Failed",
}

// parsePhase accepts a short name in any case or the proto name; "" is all.
func parsePhase(s string) (berthv1.PodPhase, error) {
	if s == "" {
		return berthv1.PodPhase_POD_PHASE_UNSPECIFIED, nil
	}
	for p, short := range phaseNames {
		if strings.EqualFold(s, short) || s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("invalid phase %q: want pending, bound, unschedulable, running, succeeded or failed", s)
}

func phaseName(p berthv1.PodPhase) string {
	if s, ok := phaseNames[p]; ok {
		return s
	}
	return "Unknown"
}
