package framework

import (
	"context"
	"slices"
	"strconv"
)

// Pods of one shape (a deployment's replicas, a batch's workers) get the
// same verdict and the same raw scores on a node that has not changed, so a
// placer may remember them per node across cycles instead of running every
// plugin on every node for every pod. A pod's signature says which pods
// share those results; the interfaces below let each plugin state what of
// a pod it reads, or that it reads more than the pod and the node.

// SignPlugin is a plugin that can say what its PreFilter, Filter, PreScore
// and Score read of a pod. Two pods whose signatures are equal must get,
// from this plugin, the same PreFilter outcome as far as Filter is
// concerned, the same Filter status and the same raw Score on every node
// whose NodeInfo is unchanged (same Generation), given the same snapshot
// node list. A plugin whose results depend on other nodes or pods (counts
// over topology domains, affinity of existing pods, anything its PreScore
// gathers from the feasible nodes it is handed) either reports false, or
// implements SignatureGuard or SignatureStamper as well.
type SignPlugin interface {
	Plugin
	// AppendSignature appends what the plugin reads of pod to sig and
	// returns it, or false if the plugin's results for pod cannot be
	// told from a signature. The bytes are compared, never parsed: any
	// unambiguous encoding will do.
	AppendSignature(sig []byte, pod *PodInfo) ([]byte, bool)
}

// SignatureGuard is a SignPlugin whose results also depend on the cluster
// beyond the node at hand in some states. SignaturesValid is asked once
// per cycle, after the snapshot is updated: false means no pod's results
// may be reused or remembered in this cycle.
type SignatureGuard interface {
	SignaturesValid() bool
}

// SignatureStamper is a SignPlugin whose Filter and Score results for a
// signed pod depend on the cluster beyond the node (counts over topology
// domains), but which can tell them cheaply per node once the cycle's
// PreFilter and PreScore have run. A remembered result stands for a node
// only while the stamps the plugin gives for it now equal those it gave
// when the result was made, so a stamp must determine the plugin's own
// result on that node: its Filter status (code, reasons) or its raw Score.
// Returning an encoding of the result itself is the simplest way. The
// plugin's signature part then only needs to cover what decides its
// PreFilter and PreScore outcomes beyond the skip masks (often nothing).
type SignatureStamper interface {
	SignPlugin
	// FilterStamp is called only in cycles whose PreFilter did not skip
	// the plugin's Filter, possibly concurrently for different nodes.
	FilterStamp(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) uint64
	// ScoreStamp is called only in cycles whose PreScore did not skip the
	// plugin's Score, possibly concurrently for different nodes.
	ScoreStamp(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) uint64
}

// MaxStampers bounds the stamping plugins of a framework; stamps are kept
// side by side, never hashed together, so equal stamps are equal results.
const MaxStampers = 2

// Stamps are the stamps of a framework's stamping plugins, in a fixed
// order; unused entries are 0.
type Stamps [MaxStampers]uint64

// podSignature is a pod's signature as computed by one framework for one
// version of the pod.
type podSignature struct {
	owner any
	pod   *Pod
	sig   string
	ok    bool
}

// CachedSignature returns the signature owner computed earlier for this
// pod, if any. Only the scheduling loop that owns the pod calls it, so
// there is no lock.
func (pi *PodInfo) CachedSignature(owner any) (sig string, ok, cached bool) {
	if s := pi.sig; s != nil && s.owner == owner && s.pod == pi.Pod {
		return s.sig, s.ok, true
	}
	return "", false, false
}

// CacheSignature remembers owner's signature for this version of the pod.
// The queue copies a PodInfo for a new version whose spec is unchanged,
// but fields plugins read may still differ (rejections, the node name), so
// the signature is tied to the Pod it was computed from.
func (pi *PodInfo) CacheSignature(owner any, sig string, ok bool) {
	pi.sig = &podSignature{owner: owner, pod: pi.Pod, sig: sig, ok: ok}
}

// Separators of the signature encoding: field values are length-prefixed,
// so no value can forge a boundary.

// AppendSigString appends s with its length.
func AppendSigString(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// AppendSigInt appends an integer and a terminator.
func AppendSigInt(b []byte, v int64) []byte {
	b = strconv.AppendInt(b, v, 10)
	return append(b, ';')
}

// AppendSigResource appends every quantity of r, scalars in name order.
func AppendSigResource(b []byte, r *Resource) []byte {
	b = AppendSigInt(b, r.MilliCPU)
	b = AppendSigInt(b, r.Memory)
	b = AppendSigInt(b, r.EphemeralStorage)
	b = AppendSigInt(b, r.AllowedPodNumber)
	b = AppendSigInt(b, int64(len(r.Scalar)))
	if len(r.Scalar) == 0 {
		return b
	}
	names := make([]string, 0, len(r.Scalar))
	for name := range r.Scalar {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b = AppendSigString(b, name)
		b = AppendSigInt(b, r.Scalar[name])
	}
	return b
}

// AppendSigTolerations appends tolerations in order (order does not change
// whether a taint is tolerated, but keeping it is simpler and only splits
// signatures that were equal anyway).
func AppendSigTolerations(b []byte, tols []Toleration) []byte {
	b = AppendSigInt(b, int64(len(tols)))
	for i := range tols {
		t := &tols[i]
		b = AppendSigString(b, t.Key)
		b = AppendSigString(b, string(t.Operator))
		b = AppendSigString(b, t.Value)
		b = AppendSigString(b, string(t.Effect))
		if t.TolerationSeconds != nil {
			b = AppendSigInt(b, *t.TolerationSeconds)
		} else {
			b = append(b, '-')
		}
	}
	return b
}

// AppendSigStringMap appends a map's entries in key order.
func AppendSigStringMap(b []byte, m map[string]string) []byte {
	b = AppendSigInt(b, int64(len(m)))
	if len(m) == 0 {
		return b
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = AppendSigString(b, k)
		b = AppendSigString(b, m[k])
	}
	return b
}
