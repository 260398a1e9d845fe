package framework

// TaintNodeUnschedulable is the taint Kubernetes puts on cordoned nodes;
// a pod tolerating it may land on a node marked Unschedulable.
const TaintNodeUnschedulable = "node.kubernetes.io/unschedulable"

// TaintNodeUnreachable (effect NoSchedule) marks a node whose lease
// expired, as Kubernetes' node.kubernetes.io/unreachable does: only pods
// tolerating it are placed there.
const TaintNodeUnreachable = "node.berth.io/unreachable"

// ToleratesTaint reports whether t tolerates taint, with Kubernetes'
// rules: an empty effect matches every effect, an empty key with Exists
// matches every key, an empty operator means Equal.
func (t *Toleration) ToleratesTaint(taint *Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", TolerationOpEqual:
		return t.Value == taint.Value
	case TolerationOpExists:
		return true
	default:
		return false
	}
}

// TolerationsTolerateTaint reports whether any toleration tolerates taint.
func TolerationsTolerateTaint(tolerations []Toleration, taint *Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(taint) {
			return true
		}
	}
	return false
}

// FindMatchingUntoleratedTaint returns the first taint, in node order,
// that passes include and that no toleration tolerates.
func FindMatchingUntoleratedTaint(taints []Taint, tolerations []Toleration, include func(*Taint) bool) (Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if include != nil && !include(t) {
			continue
		}
		if !TolerationsTolerateTaint(tolerations, t) {
			return *t, true
		}
	}
	return Taint{}, false
}

// DoNotScheduleTaint selects the taints that forbid placement: NoSchedule
// and NoExecute.
func DoNotScheduleTaint(t *Taint) bool {
	return t.Effect == TaintEffectNoSchedule || t.Effect == TaintEffectNoExecute
}
