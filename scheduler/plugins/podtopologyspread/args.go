package podtopologyspread

import (
	"errors"
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
)

// DefaultingType picks where the cluster default constraints come from.
type DefaultingType string

// Defaulting types, kube's names.
const (
	// SystemDefaulting uses kube's built-in defaults: spread by hostname
	// (maxSkew 3) and zone (maxSkew 5), both ScheduleAnyway.
	SystemDefaulting DefaultingType = "System"
	// ListDefaulting uses Args.DefaultConstraints (possibly none).
	ListDefaulting DefaultingType = "List"
)

// Args configures PodTopologySpread. The zero value is kube's default:
// System defaulting.
type Args struct {
	// DefaultConstraints apply to pods that set no constraints of their
	// own; only with ListDefaulting. They must not set a LabelSelector:
	// the selector is derived from each pod.
	DefaultConstraints []framework.TopologySpreadConstraint
	// DefaultingType defaults to ListDefaulting (see argsFrom).
	DefaultingType DefaultingType
}

// systemDefaultConstraints are kube's built-in defaults.
var systemDefaultConstraints = []framework.TopologySpreadConstraint{
	{TopologyKey: LabelHostname, WhenUnsatisfiable: framework.ScheduleAnyway, MaxSkew: 3},
	{TopologyKey: LabelTopologyZone, WhenUnsatisfiable: framework.ScheduleAnyway, MaxSkew: 5},
}

// argsFrom accepts nil, Args or *Args, and fills in the defaults.
func argsFrom(args any) (Args, error) {
	a, err := framework.DecodeArgs[Args](Name, args)
	if err != nil {
		return Args{}, err
	}
	if a.DefaultingType == "" {
		// Kube defaults to System, whose selector comes from the services
		// and controllers owning a pod; an ownerless pod gets nothing.
		// Berth pods have no owners, so its default is the same outcome
		// said plainly: List, with no constraints unless configured.
		// System (by the pod's own labels) is an explicit opt-in: it
		// counts every matching pod in each cycle.
		a.DefaultingType = ListDefaulting
	}
	return a, nil
}

// validate checks defaulted args as kube's ValidatePodTopologySpreadArgs
// (label name syntax aside).
func validate(a *Args) error {
	var errs []error
	switch a.DefaultingType {
	case SystemDefaulting:
		if len(a.DefaultConstraints) > 0 {
			errs = append(errs, errors.New(`defaultingType: "System" is invalid when defaultConstraints are not empty`))
		}
	case ListDefaulting:
	default:
		errs = append(errs, fmt.Errorf("defaultingType: unsupported value %q, want %q or %q", a.DefaultingType, SystemDefaulting, ListDefaulting))
	}
	for i, c := range a.DefaultConstraints {
		if c.MaxSkew <= 0 {
			errs = append(errs, fmt.Errorf("defaultConstraints[%d].maxSkew: %d not in valid range (0, inf)", i, c.MaxSkew))
		}
		if c.TopologyKey == "" {
			errs = append(errs, fmt.Errorf("defaultConstraints[%d].topologyKey: can not be empty", i))
		}
		switch c.WhenUnsatisfiable {
		case framework.DoNotSchedule, framework.ScheduleAnyway:
		case "":
			errs = append(errs, fmt.Errorf("defaultConstraints[%d].whenUnsatisfiable: can not be empty", i))
		default:
			errs = append(errs, fmt.Errorf("defaultConstraints[%d].whenUnsatisfiable: unsupported value %q", i, c.WhenUnsatisfiable))
		}
		if c.LabelSelector != nil {
			errs = append(errs, fmt.Errorf("defaultConstraints[%d].labelSelector: constraint must not define a selector, as they deduced for each pod", i))
		}
		for j := range i {
			o := &a.DefaultConstraints[j]
			if o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable {
				errs = append(errs, fmt.Errorf("defaultConstraints[%d]: duplicate {%s, %s}", i, c.TopologyKey, c.WhenUnsatisfiable))
				break
			}
		}
	}
	return errors.Join(errs...)
}
