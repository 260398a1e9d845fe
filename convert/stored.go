package convert

import (
	"slices"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
)

// A restart converts every stored pod, and at 200,000 pods decoding them
// into *berthv1.Pod first (a dozen allocations each: maps, containers,
// status, strings) and then converting was most of a snapshot load's CPU.
// StoredValueToCore reads the stored bytes straight into the core's form:
// scalars are read in place, strings that repeat are looked up in the
// interner by their bytes, and the fields pods of one workload share
// (labels, containers, overhead, node selector) are looked up by their
// encoded bytes, so an equal field costs one map lookup and no
// allocation. Anything unusual about the layout takes the slow path
// (decode, then podToCore), so the result is always what that gives.

// Pod field numbers (proto/berth/v1/types.proto).
const (
	podNamespaceField      = 1
	podNameField           = 2
	podUIDField            = 3
	podLabelsField         = 4
	podPriorityField       = 5
	podContainersField     = 6
	podInitContainersField = 7
	podOverheadField       = 8
	podNodeNameField       = 9
	podSchedulerNameField  = 10
	podStatusField         = 11
	podNodeSelectorField   = 12
	podTolerationsField    = 13
	podSpreadField         = 15
	podGatesField          = 16
	podPreemptionField     = 17
	podGroupField          = 18

	statusPhaseField       = 1
	statusMessageField     = 2
	statusNominatedField   = 3
	statusStartTimeField   = 4
	statusPreemptedByField = 6
	statusScheduledByField = 7
	statusNodeLostField    = 9
)

// StoredValueToCore converts a pod from its stored value, read at
// modRevision: the same pod as StoredPodToCore of the decoded value. The
// core keeps value as a pending pod's Source; if borrowed, value may
// change after the call, and a pending pod keeps a copy instead.
func StoredValueToCore(value []byte, modRevision int64, borrowed bool) (*framework.Pod, error) {
	out, ok := pods.fastPod(value, modRevision)
	if !ok {
		p := &berthv1.Pod{}
		if err := proto.Unmarshal(value, p); err != nil {
			return nil, err
		}
		out = podToCore(p, modRevision)
	}
	if out.NodeName != "" {
		return out, nil
	}
	if borrowed {
		out.Source = string(value)
	} else {
		// Shared, as StoredPodToCore shares it.
		out.Source = unsafe.String(unsafe.SliceData(value), len(value))
	}
	return out, nil
}

// podFields is a stored pod as scanPod finds it: scalars read in place,
// strings as views of the value, and the byte ranges of the fields that
// are converted as a whole, each the field's every occurrence, tags
// included, which a canonical encoding writes together.
type podFields struct {
	namespace, name, uid, nodeName, scheduler, group []byte
	status                                           []byte
	priority                                         int32
	preemption                                       berthv1.PreemptionPolicy

	labels, containers, initContainers, overhead, nodeSelector span
	// rare holds tolerations through scheduling gates (13 to 16): few
	// pods have them, and they are decoded as a Pod of those fields alone.
	rare span
}

// span is a range of an encoded pod; the zero span is empty.
type span struct{ start, end int }

// extend grows s to end at end, starting at start if it was empty.
func (s *span) extend(start, end int) {
	if s.end == 0 {
		s.start = start
	}
	s.end = end
}

func (s span) of(value []byte) []byte { return value[s.start:s.end:s.end] }

// isRepeated: fields that may occur more than once in a canonical
// encoding (maps and repeated fields).
func isRepeated(num protowire.Number) bool {
	switch num {
	case podLabelsField, podContainersField, podInitContainersField, podOverheadField,
		podNodeSelectorField, podTolerationsField, podSpreadField, podGatesField:
		return true
	}
	return false
}

// scanPod reads value's fields if its layout is the canonical one
// (fields in number order, each message field once, valid UTF-8); ok
// false sends the caller down the slow path.
func scanPod(value []byte) (f podFields, ok bool) {
	last := protowire.Number(0)
	rest := value
	for len(rest) > 0 {
		num, typ, n := protowire.ConsumeTag(rest)
		// ConsumeTag lets through numbers above the largest a message may
		// use; the decoder refuses them, so this must too.
		if n < 0 || !num.IsValid() {
			return f, false
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return f, false
		}
		start := len(value) - len(rest)
		body := rest[n : n+m]
		rest = rest[n+m:]
		end := len(value) - len(rest)
		if num < last || (num == last && !isRepeated(num)) {
			return f, false
		}
		last = num
		switch num {
		case podPriorityField, podPreemptionField:
			if typ != protowire.VarintType {
				return f, false
			}
			v, _ := protowire.ConsumeVarint(body)
			if num == podPriorityField {
				f.priority = int32(v)
			} else {
				f.preemption = berthv1.PreemptionPolicy(int32(v))
			}
			continue
		}
		if num > podGroupField {
			continue // unknown to this build: the decoder would keep it aside
		}
		if typ != protowire.BytesType {
			return f, false
		}
		b, _ := protowire.ConsumeBytes(body)
		switch num {
		case podNamespaceField, podNameField, podUIDField, podNodeNameField, podSchedulerNameField, podGroupField:
			if !utf8.Valid(b) {
				return f, false
			}
			*f.stringField(num) = b
		case podLabelsField:
			f.labels.extend(start, end)
		case podContainersField:
			f.containers.extend(start, end)
		case podInitContainersField:
			f.initContainers.extend(start, end)
		case podOverheadField:
			f.overhead.extend(start, end)
		case podNodeSelectorField:
			f.nodeSelector.extend(start, end)
		case podStatusField:
			f.status = b
		default: // 13 to 16
			f.rare.extend(start, end)
		}
	}
	return f, true
}

// stringField is where scanPod keeps the string field num.
func (f *podFields) stringField(num protowire.Number) *[]byte {
	switch num {
	case podNamespaceField:
		return &f.namespace
	case podNameField:
		return &f.name
	case podUIDField:
		return &f.uid
	case podNodeNameField:
		return &f.nodeName
	case podSchedulerNameField:
		return &f.scheduler
	}
	return &f.group
}

// fastPod converts value without decoding it into a berthv1.Pod, if
// scanPod can read it; ok false sends the caller down the slow path.
func (in *interner) fastPod(value []byte, modRevision int64) (*framework.Pod, bool) {
	f, ok := scanPod(value)
	if !ok {
		return nil, false
	}
	name, uid := f.name, f.uid
	// The name and uid are the pod's own, in one allocation, which
	// nothing writes once it is a string.
	buf := append(append(make([]byte, 0, len(name)+len(uid)), name...), uid...)
	nameUID := unsafe.String(unsafe.SliceData(buf), len(buf))
	out := &framework.Pod{
		Name:             nameUID[:len(name)],
		UID:              nameUID[len(name):],
		Priority:         f.priority,
		PreemptionPolicy: framework.PreemptLowerPriority,
		Revision:         modRevision,
	}
	if f.preemption == berthv1.PreemptionPolicy_PREEMPTION_POLICY_NEVER {
		out.PreemptionPolicy = framework.PreemptNever
	}
	var ex framework.PodExtras
	var st statusFields
	if f.status != nil {
		if st, ok = parseStatus(f.status); !ok {
			whole := &berthv1.PodStatus{}
			if proto.Unmarshal(f.status, whole) != nil {
				return nil, false
			}
			st = statusFields{whole: whole}
		}
	}
	if f.rare.end > 0 {
		p := &berthv1.Pod{}
		if proto.Unmarshal(f.rare.of(value), p) != nil {
			return nil, false
		}
		out.Tolerations = tolerationsToCore(p.GetTolerations())
		out.Affinity = affinityToCore(p.GetAffinity())
		out.TopologySpreadConstraints = spreadToCore(p.GetTopologySpreadConstraints())
		ex.SchedulingGates = p.GetSchedulingGates()
	}
	// Nearly every pod's shared values are in the tables already: they
	// are looked up under the read lock, so that a restart's conversions
	// on every core do not queue on one another (under the write lock, two
	// cores converted no faster than one). A pod that brings a new value
	// takes the write lock and looks up again.
	in.mu.RLock()
	found := in.lookupShared(out, &ex, &f, &st, value)
	in.mu.RUnlock()
	if !found {
		in.mu.Lock()
		ok := in.shareLocked(out, &ex, &f, &st, value)
		in.mu.Unlock()
		if !ok {
			return nil, false
		}
	}
	if st.whole == nil {
		out.Phase = podPhases[st.phase]
		ex.PreemptedBy = string(st.preemptedBy)
		if st.started {
			out.StartTime = time.Unix(st.seconds, int64(st.nanos)).UTC()
		}
	}
	if out.Phase == 0 {
		out.Phase = framework.PodPending
	}
	if !ex.IsZero() {
		own := ex // only a pod with extras allocates them
		out.Extras = &own
	}
	return out, true
}

// statusFields is a stored PodStatus as the core reads it: its scalars, or
// whole, decoded, when it holds more (a diagnosis, rejections).
type statusFields struct {
	whole                           *berthv1.PodStatus
	phase                           berthv1.PodPhase
	message, nominated, preemptedBy []byte
	started                         bool
	seconds                         int64
	nanos                           int32
}

// parseStatus reads a canonical status holding only the fields the core
// reads in place; ok false: decode it whole.
func parseStatus(b []byte) (statusFields, bool) {
	var st statusFields
	last := protowire.Number(0)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || !num.IsValid() {
			return st, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 || num <= last {
			return st, false
		}
		body := b[n : n+m]
		b = b[n+m:]
		last = num
		switch num {
		case statusPhaseField, statusNodeLostField:
			if typ != protowire.VarintType {
				return st, false
			}
			if num == statusPhaseField {
				v, _ := protowire.ConsumeVarint(body)
				st.phase = berthv1.PodPhase(int32(v))
			}
		case statusMessageField, statusNominatedField, statusPreemptedByField, statusScheduledByField:
			s, _ := protowire.ConsumeBytes(body)
			if typ != protowire.BytesType || !utf8.Valid(s) {
				return st, false
			}
			switch num {
			case statusMessageField:
				st.message = s
			case statusNominatedField:
				st.nominated = s
			case statusPreemptedByField:
				st.preemptedBy = s
			}
		case statusStartTimeField:
			ts, _ := protowire.ConsumeBytes(body)
			if typ != protowire.BytesType || !parseTimestamp(ts, &st) {
				return st, false
			}
		default:
			return st, false // a diagnosis, rejections, or a field unknown here
		}
	}
	return st, true
}

// parseTimestamp reads a canonical google.protobuf.Timestamp.
func parseTimestamp(b []byte, st *statusFields) bool {
	st.started = true
	last := protowire.Number(0)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.VarintType || num <= last || num > 2 {
			return false
		}
		v, m := protowire.ConsumeVarint(b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
		last = num
		if num == 1 {
			st.seconds = int64(v)
		} else {
			st.nanos = int32(v)
		}
	}
	return true
}

// shareLocked fills the values of out and its extras ex that pods share,
// adding to the tables what they lack; false if a field does not decode.
// A status decoded whole is converted here too, its strings shared.
func (in *interner) shareLocked(out *framework.Pod, ex *framework.PodExtras, f *podFields, st *statusFields, value []byte) bool {
	out.Namespace = in.strBytesLocked(f.namespace, maxInternedLen)
	out.NodeName = in.nodeNameLocked(f.nodeName)
	out.SchedulerName = in.strBytesLocked(f.scheduler, maxInternedLen)
	out.PodGroup = in.strBytesLocked(f.group, maxInternedLen)
	if !in.fieldsLocked(out, ex, f, value) {
		return false
	}
	if st.whole != nil {
		statusToCore(out, ex, st.whole)
		ex.NominatedNodeName = in.nodeNameStrLocked(ex.NominatedNodeName)
		ex.StatusMessage = in.strLocked(ex.StatusMessage, maxInternedKey)
		return true
	}
	ex.NominatedNodeName = in.nodeNameLocked(st.nominated)
	ex.StatusMessage = in.strBytesLocked(st.message, maxInternedKey)
	return true
}

// lookupShared is shareLocked for a caller holding the read lock: it only
// looks up, and reports false if any value is not in the tables yet (or
// the status needs decoding whole), leaving the rest to shareLocked.
func (in *interner) lookupShared(out *framework.Pod, ex *framework.PodExtras, f *podFields, st *statusFields, value []byte) bool {
	if st.whole != nil {
		return false
	}
	var ok [11]bool
	out.Namespace, ok[0] = lookupIn(in.strings, f.namespace, maxInternedLen)
	out.NodeName, ok[1] = lookupIn(in.nodeNames, f.nodeName, maxInternedLen)
	out.SchedulerName, ok[2] = lookupIn(in.strings, f.scheduler, maxInternedLen)
	out.PodGroup, ok[3] = lookupIn(in.strings, f.group, maxInternedLen)
	out.Labels, ok[4] = lookupSpanOnly(in.spanMaps, f.labels.of(value))
	out.NodeSelector, ok[5] = lookupSpanOnly(in.spanMaps, f.nodeSelector.of(value))
	ex.Overhead, ok[6] = lookupSpanOnly(in.spanResources, f.overhead.of(value))
	out.Containers, ok[7] = lookupSpanOnly(in.spanContainers, f.containers.of(value))
	ex.InitContainers, ok[8] = lookupSpanOnly(in.spanContainers, f.initContainers.of(value))
	ex.NominatedNodeName, ok[9] = lookupIn(in.nodeNames, st.nominated, maxInternedLen)
	ex.StatusMessage, ok[10] = lookupIn(in.strings, st.message, maxInternedKey)
	return !slices.Contains(ok[:], false)
}

// lookupIn is the read half of interning b in table: the shared string,
// or b's own when it is empty or too long to share; false if b would be
// shared but is not in table yet. It writes nothing, so the read lock
// will do.
func lookupIn(table map[string]string, b []byte, limit int) (string, bool) {
	if len(b) == 0 {
		return "", true
	}
	if len(b) > limit {
		return string(b), true
	}
	v, ok := table[string(b)]
	return v, ok
}

// lookupSpanOnly is the read half of lookupSpan: the value table holds
// for b (zero for an absent field); false if it holds none. It writes
// nothing, so the read lock will do.
func lookupSpanOnly[V any](table map[string]V, b []byte) (V, bool) {
	if len(b) == 0 {
		var zero V
		return zero, true
	}
	v, ok := table[string(b)]
	return v, ok
}

// strBytesLocked is strLocked for a string given as bytes: a string
// already interned costs no allocation.
func (in *interner) strBytesLocked(b []byte, limit int) string {
	if v, ok := lookupIn(in.strings, b, limit); ok {
		return v
	}
	return in.strLocked(string(b), limit)
}

// fieldsLocked fills the shared fields of out and its extras ex from
// their encoded ranges of value, each looked up by its bytes first; false
// if one does not decode.
func (in *interner) fieldsLocked(out *framework.Pod, ex *framework.PodExtras, f *podFields, value []byte) bool {
	maps := func() map[string]map[string]string { return in.spanMaps }
	resources := func() map[string]framework.ResourceList { return in.spanResources }
	containers := func() map[string][]framework.Container { return in.spanContainers }
	var ok [5]bool
	out.Labels, ok[0] = lookupSpan(in, maps, f.labels.of(value), func(p *berthv1.Pod) map[string]string {
		return in.stringMapLocked(p.GetLabels())
	})
	out.NodeSelector, ok[1] = lookupSpan(in, maps, f.nodeSelector.of(value), func(p *berthv1.Pod) map[string]string {
		return in.stringMapLocked(p.GetNodeSelector())
	})
	ex.Overhead, ok[2] = lookupSpan(in, resources, f.overhead.of(value), func(p *berthv1.Pod) framework.ResourceList {
		return in.resourceListLocked(framework.ResourceList(p.GetOverhead()))
	})
	out.Containers, ok[3] = lookupSpan(in, containers, f.containers.of(value), func(p *berthv1.Pod) []framework.Container {
		return in.containerListLocked(containersToCore(p.GetContainers()))
	})
	ex.InitContainers, ok[4] = lookupSpan(in, containers, f.initContainers.of(value), func(p *berthv1.Pod) []framework.Container {
		return in.containerListLocked(containersToCore(p.GetInitContainers()))
	})
	return ok == [5]bool{true, true, true, true, true}
}

// lookupSpan returns the value of an encoded field: the one table() holds
// for its bytes, or convert's result on a Pod decoded from them alone,
// which the table then keeps if they are short. The bytes include the
// field's tags, so two fields sharing a table (labels, node selector)
// never collide. The table is read anew after convert, which may have
// filled the interner up and started it afresh.
func lookupSpan[V any](in *interner, table func() map[string]V, b []byte, convert func(*berthv1.Pod) V) (V, bool) {
	if v, ok := lookupSpanOnly(table(), b); ok {
		return v, true
	}
	p := &berthv1.Pod{}
	if proto.Unmarshal(b, p) != nil {
		var zero V
		return zero, false
	}
	v := convert(p)
	if len(b) <= maxInternedKey {
		key := string(b)
		table()[key] = v
		in.added(key)
	}
	return v, true
}
