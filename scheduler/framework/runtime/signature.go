package runtime

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
)

// This file is the framework's side of signature batching (see
// framework.SignPlugin): computing a pod's signature from its plugins, and
// telling the placer when remembered results cannot stand.

// PodSignature returns the pod's signature under this framework: every
// PreFilter, Filter, PreScore and Score plugin's part, in a fixed order.
// ok is false when any of them cannot sign the pod (or is not a
// SignPlugin), and then the pod must be scheduled without reuse. The
// result is cached on the PodInfo.
func (f *Framework) PodSignature(pod *framework.PodInfo) (sig string, ok bool) {
	if sig, ok, cached := pod.CachedSignature(f); cached {
		return sig, ok
	}
	sig, ok = f.computeSignature(pod)
	pod.CacheSignature(f, sig, ok)
	return sig, ok
}

func (f *Framework) computeSignature(pod *framework.PodInfo) (string, bool) {
	if !f.allSign {
		return "", false
	}
	var b []byte
	if f.sigMu.TryLock() {
		defer func() { f.sigBuf = b[:0]; f.sigMu.Unlock() }()
		b = f.sigBuf
	}
	for i, p := range f.signers {
		var ok bool
		// The plugin's position, not its name: signatures are compared
		// only within one framework, whose signers keep their order, and
		// the names made up most of a plain pod's signature's bytes, which
		// every memo lookup hashes.
		b = framework.AppendSigInt(b, int64(i))
		if b, ok = p.AppendSignature(b, pod); !ok {
			return "", false
		}
	}
	return string(b), true
}

// collectSigners lists, once, the distinct plugins of the per-pod and
// per-node extension points in a fixed order, and notes whether every one
// of them can sign.
func (f *Framework) collectSigners() {
	seen := map[string]bool{}
	f.allSign = true
	add := func(p framework.Plugin) {
		if seen[p.Name()] {
			return
		}
		seen[p.Name()] = true
		s, ok := p.(framework.SignPlugin)
		if !ok {
			f.allSign = false
			return
		}
		f.signers = append(f.signers, s)
		if g, ok := p.(framework.SignatureGuard); ok {
			f.guards = append(f.guards, g)
		}
		if st, ok := p.(framework.SignatureStamper); ok {
			f.addStamper(st)
		}
	}
	for _, p := range f.preFilter {
		add(p)
	}
	for _, p := range f.filter {
		add(p)
	}
	for _, p := range f.preScore {
		add(p)
	}
	for _, p := range f.score {
		add(p)
	}
}

// SignaturesUsable reports whether results may be reused by signature in
// this cycle: every plugin can sign, every guard agrees for the current
// snapshot, and no pod is nominated anywhere. The nominations' version
// comes back so the caller can tell whether they changed during the
// cycle (see NominationsVersion).
func (f *Framework) SignaturesUsable() (nominationsVersion uint64, usable bool) {
	if !f.allSign {
		return 0, false
	}
	v, none, ok := f.NominationsVersion()
	if !ok || !none {
		return v, false
	}
	for _, g := range f.guards {
		if !g.SignaturesValid() {
			return v, false
		}
	}
	return v, true
}

// VersionedPodNominator is a PodNominator that numbers its changes, so a
// placer can tell that no nomination existed or changed across a cycle
// without asking about every node.
type VersionedPodNominator interface {
	// NominationsVersion returns a number that changes with every change
	// of the nominations, odd while one is being made, and whether there
	// are none.
	NominationsVersion() (version uint64, none bool)
}

// NominationsVersion returns the nominator's version and whether it holds
// no nomination; ok is false if the nominator cannot say. Without a
// nominator there is never any nomination. An odd version (a change in
// progress) reports none as false.
func (f *Framework) NominationsVersion() (version uint64, none, ok bool) {
	if f.nominator == nil {
		return 0, true, true
	}
	vn, is := f.nominator.(VersionedPodNominator)
	if !is {
		return 0, false, false
	}
	version, none = vn.NominationsVersion()
	return version, none && version%2 == 0, true
}

// NumActiveScorePlugins returns how many Score plugins state's cycle runs
// (those PreScore did not skip): the slots of a RawScoreMemo.
func (f *Framework) NumActiveScorePlugins(state *framework.CycleState) int {
	skip, n := state.SkipScorePlugins(), 0
	for i := range f.score {
		if skip&f.scoreBit[i] == 0 {
			n++
		}
	}
	return n
}

// stamper is a SignatureStamper with the skip bits of its Filter and
// Score (0 where it is not one).
type stamper struct {
	framework.SignatureStamper
	filterBit, scoreBit uint64
}

// addStamper notes a stamping plugin; past framework.MaxStampers, pods
// cannot be signed at all.
func (f *Framework) addStamper(p framework.SignatureStamper) {
	if len(f.stampers) == framework.MaxStampers {
		f.allSign = false
		return
	}
	s := stamper{SignatureStamper: p}
	for i, fp := range f.filter {
		if fp.Name() == p.Name() {
			s.filterBit = f.filterBit[i]
		}
	}
	for i, sp := range f.score {
		if sp.Name() == p.Name() {
			s.scoreBit = f.scoreBit[i]
		}
	}
	f.stampers = append(f.stampers, s)
}

// FilterStamped reports whether any stamping plugin's Filter runs in
// state's cycle: only then do FilterStamps differ between nodes.
func (f *Framework) FilterStamped(state *framework.CycleState) bool {
	skip := state.SkipFilterPlugins()
	for _, s := range f.stampers {
		if s.filterBit != 0 && skip&s.filterBit == 0 {
			return true
		}
	}
	return false
}

// FilterStamps returns the stamps of the stamping plugins whose Filter
// runs in state's cycle, for node.
func (f *Framework) FilterStamps(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) framework.Stamps {
	var out framework.Stamps
	skip := state.SkipFilterPlugins()
	for i, s := range f.stampers {
		if s.filterBit != 0 && skip&s.filterBit == 0 {
			out[i] = s.FilterStamp(ctx, state, pod, node)
		}
	}
	return out
}

// ScoreStamped reports whether any stamping plugin's Score runs in
// state's cycle.
func (f *Framework) ScoreStamped(state *framework.CycleState) bool {
	skip := state.SkipScorePlugins()
	for _, s := range f.stampers {
		if s.scoreBit != 0 && skip&s.scoreBit == 0 {
			return true
		}
	}
	return false
}

// ScoreStamps returns the stamps of the stamping plugins whose Score runs
// in state's cycle, for node.
func (f *Framework) ScoreStamps(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) framework.Stamps {
	var out framework.Stamps
	skip := state.SkipScorePlugins()
	for i, s := range f.stampers {
		if s.scoreBit != 0 && skip&s.scoreBit == 0 {
			out[i] = s.ScoreStamp(ctx, state, pod, node)
		}
	}
	return out
}

// PreScoreUsesNodes reports whether a PreScore plugin may read the
// feasible nodes it is given for pod (see framework.PreScoreNodesUser).
// When none does, a placer may run PreScore without listing them.
func (f *Framework) PreScoreUsesNodes(pod *framework.PodInfo) bool {
	for _, pl := range f.preScore {
		u, ok := pl.(framework.PreScoreNodesUser)
		if !ok || u.PreScoreUsesNodes(pod) {
			return true
		}
	}
	return false
}

// ActiveScorers appends to weights and norms, for each Score plugin
// state's cycle runs (the order of a RawScoreMemo's slots), its weight and
// its MaxNormalizer, nil for a plugin without NormalizeScore. ok is false
// when a plugin normalizes in a way a MaxNormalizer cannot stand for.
func (f *Framework) ActiveScorers(state *framework.CycleState, weights []int64, norms []framework.MaxNormalizer) (_ []int64, _ []framework.MaxNormalizer, ok bool) {
	skip := state.SkipScorePlugins()
	for i, pl := range f.score {
		if skip&f.scoreBit[i] != 0 {
			continue
		}
		var norm framework.MaxNormalizer
		if ext := pl.ScoreExtensions(); ext != nil {
			if norm, ok = ext.(framework.MaxNormalizer); !ok {
				return weights, norms, false
			}
		}
		weights = append(weights, f.scoreWeight[i])
		norms = append(norms, norm)
	}
	return weights, norms, true
}

// ScoreNodeRaw scores ni with every Score plugin state's cycle runs, raw
// scores into raw (one slot per plugin, in ActiveScorers' order).
func (f *Framework) ScoreNodeRaw(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, ni *framework.NodeInfo, raw []int64) *framework.Status {
	skip, p := state.SkipScorePlugins(), 0
	for i, pl := range f.score {
		if skip&f.scoreBit[i] != 0 {
			continue
		}
		s, st := pl.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			return st
		}
		raw[p] = s
		p++
	}
	return nil
}
