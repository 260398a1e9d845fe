package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Field numbers MarkBoundValue edits (proto/berth/v1/types.proto).
const (
	timestampSecondsField = 1
	timestampNanosField   = 2
)

// errNotCanonical says an encoded pod is not laid out the way the store
// writes pods, so editing its bytes could differ from re-encoding it.
var errNotCanonical = errors.New("store: pod encoding not canonical")

// MarkBoundValue is MarkBound on an encoded pod, as stored: it returns the
// encoding of the pod placed on node. A binding rewrites the whole stored
// pod, and decoding and re-encoding it was most of what a bind cost outside
// etcd; this rewrites only node_name and status and copies every other
// field's bytes.
//
// The result is byte for byte what decoding, MarkBound and deterministic
// encoding give when value was written by the store (fields in number
// order, as Go's encoder writes them); a value laid out otherwise takes that
// slower path, so the result is always the same.
func MarkBoundValue(value []byte, node, replica string, now time.Time) ([]byte, error) {
	if out, err := patchBound(value, node, replica, now); err == nil {
		return out, nil
	}
	p, err := decodePod(value)
	if err != nil {
		return nil, err
	}
	MarkBound(p, node, replica, now)
	out, err := marshalPod(p)
	if err != nil {
		return nil, fmt.Errorf("store: encode pod: %w", err)
	}
	return out, nil
}

// patchBound copies value's fields in order, leaving out node_name and
// status and writing the new ones where their numbers fall. It refuses
// (errNotCanonical) fields out of order or a repeated status, which a
// decoder would merge.
func patchBound(value []byte, node, replica string, now time.Time) ([]byte, error) {
	out := make([]byte, 0, len(value)+len(node)+len(replica)+32)
	var rejections []byte // the old status's rejections, as encoded
	wroteNode, wroteStatus := false, false
	last := protowire.Number(0)
	rest := value
	for len(rest) > 0 {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		field := rest[:n+m]
		rest = rest[n+m:]
		if num < last || (num == last && (num == podNodeNameField || num == podStatusField)) {
			return nil, errNotCanonical
		}
		last = num
		if num > podNodeNameField && !wroteNode {
			out = appendNodeName(out, node)
			wroteNode = true
		}
		if num > podStatusField && !wroteStatus {
			out = appendBoundStatus(out, replica, now, rejections)
			wroteStatus = true
		}
		switch num {
		case podNodeNameField:
			if typ != protowire.BytesType {
				return nil, errNotCanonical
			}
		case podStatusField:
			if typ != protowire.BytesType {
				return nil, errNotCanonical
			}
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
		out = appendNodeName(out, node)
	}
	if !wroteStatus {
		out = appendBoundStatus(out, replica, now, rejections)
	}
	return out, nil
}

// statusRejections returns the rejections fields of an encoded status,
// tags included, in order.
func statusRejections(status []byte) ([]byte, error) {
	var out []byte
	last := protowire.Number(0)
	for len(status) > 0 {
		num, typ, n := protowire.ConsumeTag(status)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, status[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if num < last {
			return nil, errNotCanonical
		}
		last = num
		if num == statusRejectionsField {
			if typ != protowire.BytesType {
				return nil, errNotCanonical
			}
			out = append(out, status[:n+m]...)
		}
		status = status[n+m:]
	}
	return out, nil
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
