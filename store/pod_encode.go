package store

import (
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Every pod written is encoded deterministically (map entries in key
// order), so that equal pods store equal bytes. protobuf-go reaches a map
// through reflection and sorts its keys on the way: a pod with two labels
// and one container took 2-3 µs and 25 allocations, the most any one step of
// storing a submitted pod allocated. marshalPod writes the same bytes
// directly for Pod, Container and PodStatus, and hands the messages few
// pods carry (tolerations, affinity, spread constraints, ports, a
// diagnosis) to proto. A pod the direct path cannot vouch for (unknown
// fields, a string that is not UTF-8, a nil list entry) goes through proto
// whole, which also gives its error. TestMarshalPodMatchesProto holds the
// two paths to the same bytes; TestPodEncoderKnowsEveryField fails when a
// field is added to one of the three messages and not here.

// marshalPod is marshalOpts.Marshal for a pod.
func marshalPod(p *berthv1.Pod) ([]byte, error) {
	if !directlyEncodable(p) {
		return marshalOpts.Marshal(p)
	}
	n := podSize(p)
	b, ok := appendPod(make([]byte, 0, n), p)
	if !ok || len(b) != n {
		return marshalOpts.Marshal(p)
	}
	return b, nil
}

// directlyEncodable reports whether the direct path writes exactly what
// proto would: no unknown fields in the messages it writes itself, no
// nil entries, and valid UTF-8 in every string it writes.
func directlyEncodable(p *berthv1.Pod) bool {
	if p == nil || len(p.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	if !validStrings(p.Namespace, p.Name, p.Uid, p.NodeName, p.SchedulerName, p.PodGroup) ||
		!validMap(p.Labels) || !validMap(p.NodeSelector) || !validKeys(p.Overhead) {
		return false
	}
	for _, g := range p.SchedulingGates {
		if !utf8.ValidString(g) {
			return false
		}
	}
	for _, cs := range [][]*berthv1.Container{p.Containers, p.InitContainers} {
		for _, c := range cs {
			if c == nil || len(c.ProtoReflect().GetUnknown()) > 0 ||
				!validStrings(c.Name, c.Image) || !validKeys(c.Requests) || slices.Contains(c.Ports, nil) {
				return false
			}
		}
	}
	if slices.Contains(p.Tolerations, nil) || slices.Contains(p.TopologySpreadConstraints, nil) {
		return false
	}
	if s := p.Status; s != nil {
		if len(s.ProtoReflect().GetUnknown()) > 0 || !validStrings(s.Message, s.NominatedNodeName, s.PreemptedBy, s.ScheduledBy) ||
			slices.Contains(s.Rejections, nil) {
			return false
		}
	}
	return true
}

func validStrings(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func validMap(m map[string]string) bool {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

func validKeys(m map[string]int64) bool {
	for k := range m {
		if !utf8.ValidString(k) {
			return false
		}
	}
	return true
}

// Pod's field numbers (proto/berth/v1/types.proto).
const (
	podNamespaceField        = 1
	podNameField             = 2
	podUIDField              = 3
	podLabelsField           = 4
	podPriorityField         = 5
	podContainersField       = 6
	podInitContainersField   = 7
	podOverheadField         = 8
	podNodeNameField         = 9
	podSchedulerNameField    = 10
	podStatusField           = 11
	podNodeSelectorField     = 12
	podTolerationsField      = 13
	podAffinityField         = 14
	podSpreadField           = 15
	podSchedulingGatesField  = 16
	podPreemptionPolicyField = 17
	podGroupField            = 18
)

func podSize(p *berthv1.Pod) int {
	n := stringSize(podNamespaceField, p.Namespace) + stringSize(podNameField, p.Name) + stringSize(podUIDField, p.Uid) +
		stringMapSize(podLabelsField, p.Labels) + varintSize(podPriorityField, enumValue(p.Priority))
	for _, cs := range [2][]*berthv1.Container{p.Containers, p.InitContainers} {
		for _, c := range cs {
			n += nestedSize(podContainersField, containerSize(c)) // containers and init_containers share a tag size
		}
	}
	n += intMapSize(podOverheadField, p.Overhead) + stringSize(podNodeNameField, p.NodeName) + stringSize(podSchedulerNameField, p.SchedulerName)
	if p.Status != nil {
		n += nestedSize(podStatusField, statusSize(p.Status))
	}
	n += stringMapSize(podNodeSelectorField, p.NodeSelector)
	for _, t := range p.Tolerations {
		n += nestedSize(podTolerationsField, marshalOpts.Size(t))
	}
	if p.Affinity != nil {
		n += nestedSize(podAffinityField, marshalOpts.Size(p.Affinity))
	}
	for _, c := range p.TopologySpreadConstraints {
		n += nestedSize(podSpreadField, marshalOpts.Size(c))
	}
	for _, g := range p.SchedulingGates {
		n += protowire.SizeTag(podSchedulingGatesField) + protowire.SizeBytes(len(g))
	}
	n += varintSize(podPreemptionPolicyField, enumValue(int32(p.PreemptionPolicy))) + stringSize(podGroupField, p.PodGroup)
	return n
}

func appendPod(b []byte, p *berthv1.Pod) ([]byte, bool) {
	b = appendString(b, podNamespaceField, p.Namespace)
	b = appendString(b, podNameField, p.Name)
	b = appendString(b, podUIDField, p.Uid)
	b = appendStringMap(b, podLabelsField, p.Labels)
	b = appendVarint(b, podPriorityField, enumValue(p.Priority))
	var ok bool
	if b, ok = appendContainers(b, podContainersField, p.Containers); !ok {
		return nil, false
	}
	if b, ok = appendContainers(b, podInitContainersField, p.InitContainers); !ok {
		return nil, false
	}
	b = appendIntMap(b, podOverheadField, p.Overhead)
	b = appendString(b, podNodeNameField, p.NodeName)
	b = appendString(b, podSchedulerNameField, p.SchedulerName)
	if p.Status != nil {
		b = protowire.AppendTag(b, podStatusField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(statusSize(p.Status)))
		if b, ok = appendStatus(b, p.Status); !ok {
			return nil, false
		}
	}
	b = appendStringMap(b, podNodeSelectorField, p.NodeSelector)
	for _, t := range p.Tolerations {
		if b, ok = appendMessage(b, podTolerationsField, t); !ok {
			return nil, false
		}
	}
	if p.Affinity != nil {
		if b, ok = appendMessage(b, podAffinityField, p.Affinity); !ok {
			return nil, false
		}
	}
	for _, c := range p.TopologySpreadConstraints {
		if b, ok = appendMessage(b, podSpreadField, c); !ok {
			return nil, false
		}
	}
	for _, g := range p.SchedulingGates {
		b = protowire.AppendTag(b, podSchedulingGatesField, protowire.BytesType)
		b = protowire.AppendString(b, g)
	}
	b = appendVarint(b, podPreemptionPolicyField, enumValue(int32(p.PreemptionPolicy)))
	b = appendString(b, podGroupField, p.PodGroup)
	return b, true
}

// Container's field numbers.
const (
	containerNameField     = 1
	containerImageField    = 2
	containerRequestsField = 3
	containerPortsField    = 4
)

func containerSize(c *berthv1.Container) int {
	n := stringSize(containerNameField, c.Name) + stringSize(containerImageField, c.Image) + intMapSize(containerRequestsField, c.Requests)
	for _, port := range c.Ports {
		n += nestedSize(containerPortsField, marshalOpts.Size(port))
	}
	return n
}

func appendContainers(b []byte, num protowire.Number, cs []*berthv1.Container) ([]byte, bool) {
	for _, c := range cs {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(containerSize(c)))
		b = appendString(b, containerNameField, c.Name)
		b = appendString(b, containerImageField, c.Image)
		b = appendIntMap(b, containerRequestsField, c.Requests)
		var ok bool
		for _, port := range c.Ports {
			if b, ok = appendMessage(b, containerPortsField, port); !ok {
				return nil, false
			}
		}
	}
	return b, true
}

// PodStatus's field numbers.
const (
	statusPhaseField       = 1
	statusMessageField     = 2
	statusNominatedField   = 3
	statusStartTimeField   = 4
	statusDiagnosisField   = 5
	statusPreemptedByField = 6
	statusScheduledByField = 7
	statusRejectionsField  = 8
	statusNodeLostField    = 9
)

func statusSize(s *berthv1.PodStatus) int {
	n := varintSize(statusPhaseField, enumValue(int32(s.Phase))) + stringSize(statusMessageField, s.Message) + stringSize(statusNominatedField, s.NominatedNodeName)
	if s.StartTime != nil {
		n += nestedSize(statusStartTimeField, marshalOpts.Size(s.StartTime))
	}
	if s.Diagnosis != nil {
		n += nestedSize(statusDiagnosisField, marshalOpts.Size(s.Diagnosis))
	}
	n += stringSize(statusPreemptedByField, s.PreemptedBy) + stringSize(statusScheduledByField, s.ScheduledBy)
	for _, r := range s.Rejections {
		n += nestedSize(statusRejectionsField, marshalOpts.Size(r))
	}
	if s.NodeLost {
		n += varintSize(statusNodeLostField, 1)
	}
	return n
}

func appendStatus(b []byte, s *berthv1.PodStatus) ([]byte, bool) {
	b = appendVarint(b, statusPhaseField, enumValue(int32(s.Phase)))
	b = appendString(b, statusMessageField, s.Message)
	b = appendString(b, statusNominatedField, s.NominatedNodeName)
	var ok bool
	if s.StartTime != nil {
		if b, ok = appendMessage(b, statusStartTimeField, s.StartTime); !ok {
			return nil, false
		}
	}
	if s.Diagnosis != nil {
		if b, ok = appendMessage(b, statusDiagnosisField, s.Diagnosis); !ok {
			return nil, false
		}
	}
	b = appendString(b, statusPreemptedByField, s.PreemptedBy)
	b = appendString(b, statusScheduledByField, s.ScheduledBy)
	for _, r := range s.Rejections {
		if b, ok = appendMessage(b, statusRejectionsField, r); !ok {
			return nil, false
		}
	}
	if s.NodeLost {
		b = appendVarint(b, statusNodeLostField, 1)
	}
	return b, true
}

// The encodings of proto3's implicit presence: a zero scalar is left out;
// a map entry always has both its key and its value.

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func varintSize(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// enumValue is an enum's or int32's varint: negative values are
// sign-extended to 64 bits, as for int32.
func enumValue(v int32) uint64 { return uint64(int64(v)) }

func nestedSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// appendMessage writes m as field num, through proto.
func appendMessage(b []byte, num protowire.Number, m proto.Message) ([]byte, bool) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(marshalOpts.Size(m)))
	b, err := marshalOpts.MarshalAppend(b, m)
	return b, err == nil
}

func stringEntrySize(k, v string) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
}

func stringMapSize(num protowire.Number, m map[string]string) int {
	n := 0
	for k, v := range m {
		n += nestedSize(num, stringEntrySize(k, v))
	}
	return n
}

func appendStringMap(b []byte, num protowire.Number, m map[string]string) []byte {
	var buf [8]string
	for _, k := range appendSortedKeys(buf[:0], m) {
		v := m[k]
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(stringEntrySize(k, v)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}

func intEntrySize(k string, v int64) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeVarint(uint64(v))
}

func intMapSize(num protowire.Number, m map[string]int64) int {
	n := 0
	for k, v := range m {
		n += nestedSize(num, intEntrySize(k, v))
	}
	return n
}

func appendIntMap(b []byte, num protowire.Number, m map[string]int64) []byte {
	var buf [8]string
	for _, k := range appendSortedKeys(buf[:0], m) {
		v := m[k]
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(intEntrySize(k, v)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

// appendSortedKeys appends m's keys to keys, in order. A pod's maps are
// small: callers pass a buffer on their stack.
func appendSortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
