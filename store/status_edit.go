package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// A pod's scheduling outcomes rewrite its whole stored value, and decoding
// and re-encoding it was most of what each cost outside etcd. The edits
// here copy every field's bytes but the ones an outcome changes.

// Field numbers MarkBoundValue edits (proto/berth/v1/types.proto).
const (
	timestampSecondsField = 1
	timestampNanosField   = 2
)

// errNotCanonical says an encoded pod is not laid out the way the store
// writes pods, so editing its bytes could differ from re-encoding it.
var errNotCanonical = errors.New("store: pod encoding not canonical")

// MarkBoundValue is MarkBound on an encoded pod, as stored: it returns the
// encoding of the pod placed on node, with only node_name and status
// rewritten.
//
// The result is byte for byte what decoding, MarkBound and deterministic
// encoding give when value was written by the store (fields in number
// order, as Go's encoder writes them); a value laid out otherwise takes that
// slower path, so the result is always the same.
func MarkBoundValue(value []byte, node, replica string, now time.Time) ([]byte, error) {
	if out, err := patchBound(value, node, replica, now); err == nil {
		return out, nil
	}
	return reencoded(value, func(p *berthv1.Pod) { MarkBound(p, node, replica, now) })
}

// MarkUnschedulableValue is MarkUnschedulable on an encoded pod, as
// stored: only the status is rewritten (its rejections kept), with the same
// guarantee as MarkBoundValue's.
func MarkUnschedulableValue(value []byte, message, nominatedNode string, diagnosis *berthv1.SchedulingDiagnosis) ([]byte, error) {
	// A string that is not UTF-8 cannot be encoded; decoding and encoding
	// gives the error.
	if utf8.ValidString(message) && utf8.ValidString(nominatedNode) {
		out, err := patchPod(value, len(message)+len(nominatedNode)+64, nil, func(b, rejections []byte) ([]byte, bool) {
			return appendUnschedulableStatus(b, message, nominatedNode, diagnosis, rejections)
		})
		if err == nil {
			return out, nil
		}
	}
	return reencoded(value, func(p *berthv1.Pod) { MarkUnschedulable(p, message, nominatedNode, diagnosis) })
}

// reencoded is the slow path of both edits: value decoded, marked, and
// encoded again.
func reencoded(value []byte, mark func(*berthv1.Pod)) ([]byte, error) {
	p, err := decodePod(value)
	if err != nil {
		return nil, err
	}
	mark(p)
	out, err := marshalPod(p)
	if err != nil {
		return nil, fmt.Errorf("store: encode pod: %w", err)
	}
	return out, nil
}

// patchBound is MarkBound's byte edit: node_name and status replaced.
func patchBound(value []byte, node, replica string, now time.Time) ([]byte, error) {
	return patchPod(value, len(node)+len(replica)+32, &node, func(b, rejections []byte) ([]byte, bool) {
		return appendBoundStatus(b, replica, now, rejections), true
	})
}

// patchPod copies value's fields in order, leaving out status, and
// node_name when node is set, and writing the new ones where their numbers
// fall: status as appendStatus writes it, given the old status's
// rejections as encoded. It refuses (errNotCanonical) fields out of order
// or a singular field repeated, which a decoder would merge, and whatever
// appendStatus refuses.
func patchPod(value []byte, grow int, node *string, appendStatus func(b, rejections []byte) ([]byte, bool)) ([]byte, error) {
	out := make([]byte, 0, len(value)+grow)
	var rejections []byte // the old status's rejections, as encoded
	wroteNode, wroteStatus := node == nil, false
	writeStatus := func() error {
		var ok bool
		if out, ok = appendStatus(out, rejections); !ok {
			return errNotCanonical
		}
		wroteStatus = true
		return nil
	}
	last := protowire.Number(0)
	rest := value
	for len(rest) > 0 {
		num, typ, n, field, err := nextField(rest)
		if err != nil {
			return nil, err
		}
		rest = rest[len(field):]
		if num < last || (num == last && !repeatedPodField(num)) || typ != podFieldType(num, typ) {
			return nil, errNotCanonical
		}
		last = num
		if num > podNodeNameField && !wroteNode {
			out = appendNodeName(out, *node)
			wroteNode = true
		}
		if num > podStatusField && !wroteStatus {
			if err := writeStatus(); err != nil {
				return nil, err
			}
		}
		switch {
		case num == podNodeNameField && node != nil:
		case num == podStatusField:
			body, _ := protowire.ConsumeBytes(field[n:])
			var err error
			if rejections, err = statusRejections(body); err != nil {
				return nil, err
			}
		default:
			out = append(out, field...)
		}
	}
	if !wroteNode {
		out = appendNodeName(out, *node)
	}
	if !wroteStatus {
		if err := writeStatus(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// podFieldType is the wire type of Pod's field num, or have for a field
// this build does not know. A known field of another type is kept by a
// decoder as unknown, and written after the known ones.
func podFieldType(num protowire.Number, have protowire.Type) protowire.Type {
	switch {
	case num == podPriorityField || num == podPreemptionPolicyField:
		return protowire.VarintType
	case num >= podNamespaceField && num <= podGroupField:
		return protowire.BytesType
	}
	return have
}

// repeatedPodField reports whether Pod's field num may occur more than
// once as the store writes it: a list or a map. A singular field twice is
// merged by a decoder, so copying both would not be what re-encoding
// gives.
func repeatedPodField(num protowire.Number) bool {
	switch num {
	case podLabelsField, podContainersField, podInitContainersField, podOverheadField,
		podNodeSelectorField, podTolerationsField, podSpreadField, podSchedulingGatesField:
		return true
	}
	return false
}

// statusRejections returns the rejections fields of an encoded status,
// tags included, in order.
func statusRejections(status []byte) ([]byte, error) {
	var out []byte
	last := protowire.Number(0)
	for len(status) > 0 {
		num, typ, _, field, err := nextField(status)
		if err != nil {
			return nil, err
		}
		if num < last {
			return nil, errNotCanonical
		}
		last = num
		if num == statusRejectionsField {
			if typ != protowire.BytesType {
				return nil, errNotCanonical
			}
			out = append(out, field...)
		}
		status = status[len(field):]
	}
	return out, nil
}

// nextField splits off b's first field: its number, wire type, the length
// of its tag, and the whole field, tag included.
func nextField(b []byte) (protowire.Number, protowire.Type, int, []byte, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, nil, protowire.ParseError(n)
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, 0, nil, protowire.ParseError(m)
	}
	return num, typ, n, b[:n+m], nil
}

func appendNodeName(b []byte, node string) []byte {
	if node == "" {
		return b
	}
	b = protowire.AppendTag(b, podNodeNameField, protowire.BytesType)
	return protowire.AppendString(b, node)
}

// appendBoundStatus appends the status MarkBound sets, encoded.
func appendBoundStatus(b []byte, replica string, now time.Time, rejections []byte) []byte {
	// timestamppb.New(now), encoded: zero fields are left out.
	var ts [2 * (1 + binary.MaxVarintLen64)]byte
	t := ts[:0]
	if s := now.Unix(); s != 0 {
		t = protowire.AppendTag(t, timestampSecondsField, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(s))
	}
	if ns := now.Nanosecond(); ns != 0 {
		t = protowire.AppendTag(t, timestampNanosField, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(ns))
	}
	size := 1 + protowire.SizeVarint(uint64(berthv1.PodPhase_POD_PHASE_BOUND)) +
		1 + protowire.SizeBytes(len(t)) + len(rejections)
	if replica != "" {
		size += 1 + protowire.SizeBytes(len(replica))
	}
	b = protowire.AppendTag(b, podStatusField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = protowire.AppendTag(b, statusPhaseField, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(berthv1.PodPhase_POD_PHASE_BOUND))
	b = protowire.AppendTag(b, statusStartTimeField, protowire.BytesType)
	b = protowire.AppendBytes(b, t)
	if replica != "" {
		b = protowire.AppendTag(b, statusScheduledByField, protowire.BytesType)
		b = protowire.AppendString(b, replica)
	}
	return append(b, rejections...)
}

// appendUnschedulableStatus appends the status MarkUnschedulable sets,
// encoded; ok false if the diagnosis cannot be.
func appendUnschedulableStatus(b []byte, message, nominatedNode string, diagnosis *berthv1.SchedulingDiagnosis, rejections []byte) ([]byte, bool) {
	body := appendVarint(nil, statusPhaseField, enumValue(int32(berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE)))
	body = appendString(body, statusMessageField, message)
	body = appendString(body, statusNominatedField, nominatedNode)
	if diagnosis != nil {
		var ok bool
		if body, ok = appendMessage(body, statusDiagnosisField, diagnosis); !ok {
			return nil, false
		}
	}
	body = append(body, rejections...)
	b = protowire.AppendTag(b, podStatusField, protowire.BytesType)
	return protowire.AppendBytes(b, body), true
}
