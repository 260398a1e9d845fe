package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func bindingEvent(t berthv1.BindingEventType, p *berthv1.Pod, rev int64) *berthv1.BindingEvent {
	return &berthv1.BindingEvent{
		Type:      t,
		Namespace: p.Namespace,
		Name:      p.Name,
		Uid:       p.Uid,
		NodeName:  p.NodeName,
		Revision:  rev,
	}
}

// bindingEvents derives the binding events of one pod change (cur nil for a
// delete): BOUND when the pod newly holds a node; UNBOUND when it no longer
// holds the node it held (deleted, finished, or sent back to pending). A pod
// that moves to another node or uid in one write yields UNBOUND of the old
// binding then BOUND of the new, both at rev.
//
// A bound pod newly marked preempted_by yields EVICT, naming the preemptor;
// one newly marked node_lost yields NODE_LOST.
func bindingEvents(prev, cur *berthv1.Pod, rev int64, emit func(*berthv1.BindingEvent) error) error {
	prevHolds, curHolds := holdsNode(prev), holdsNode(cur)
	if prevHolds && curHolds && prev.NodeName == cur.NodeName && prev.Uid == cur.Uid {
		if by := cur.GetStatus().GetPreemptedBy(); by != "" && prev.GetStatus().GetPreemptedBy() == "" {
			ev := bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_EVICT, cur, rev)
			ev.Preemptor = by
			if err := emit(ev); err != nil {
				return err
			}
		}
		if cur.GetStatus().GetNodeLost() && !prev.GetStatus().GetNodeLost() {
			return emit(nodeLostEvent(cur, rev))
		}
		return nil
	}
	if prevHolds {
		ev := bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND, prev, rev)
		ev.Message = unboundMessage(prev, cur)
		if err := emit(ev); err != nil {
			return err
		}
	}
	if curHolds {
		return emit(bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, cur, rev))
	}
	return nil
}

// nodeLostEvent reports that a pod's node lost its lease.
func nodeLostEvent(p *berthv1.Pod, rev int64) *berthv1.BindingEvent {
	ev := bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_NODE_LOST, p, rev)
	ev.Message = "node " + p.NodeName + " lost its lease"
	return ev
}

// unboundMessage says why a pod that held prev's node no longer does: the
// reason its node gave for rejecting it, or what it reported on finishing.
func unboundMessage(prev, cur *berthv1.Pod) string {
	if cur == nil || cur.Uid != prev.Uid {
		return ""
	}
	st := cur.GetStatus()
	if rs := st.GetRejections(); cur.NodeName == "" && len(rs) > 0 && rs[len(rs)-1].GetNodeName() == prev.NodeName {
		return rs[len(rs)-1].GetReason()
	}
	if Finished(st.GetPhase()) {
		return st.GetMessage()
	}
	return ""
}

// WatchOption adjusts WatchBindings.
type WatchOption func(*watchOptions)

type watchOptions struct {
	synced func(rev int64) error
}

// OnSynced is called with the listing revision once a fromRev 0 watch has
// sent every bound pod: the point a subscriber can resume from. An error
// ends the watch with that error.
func OnSynced(fn func(rev int64) error) WatchOption {
	return func(o *watchOptions) { o.synced = fn }
}

// sendError marks an error returned by the caller's send, to be returned as
// is.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }

// WatchBindings streams binding events to send, in revision order.
//
// fromRev 0: first a BOUND event for every pod currently bound (BOUND or
// RUNNING with a node), in mod revision order, each carrying its pod's mod
// revision and followed by NODE_LOST if the pod is marked node_lost; then
// live events after the listing's revision. fromRev R > 0:
// exactly the events with revision > R, once and in order; a *CompactedError
// if R is older than the compaction point (errors.Is ErrCompacted), and
// ErrFutureRevision if R is beyond the current revision.
//
// Besides pod events, a node's lease expiring yields a NODE_LOST event
// naming only the node, at the revision its lease key was deleted.
//
// It returns when ctx ends (ctx's error), when send fails (send's error), on
// compaction (the watch fell behind and cannot be resumed), with a
// *FellBehindError when the subscriber lags past the fan-out's bounds (it
// resumes from the error's revision), or with ErrClosed. Events come from
// the replica's one shared etcd watch (FollowBindings); a lost etcd stream
// is resumed by it without the subscriber noticing.
func (s *Store) WatchBindings(ctx context.Context, fromRev int64, send func(*berthv1.BindingEvent) error, opts ...WatchOption) error {
	return s.FollowBindings(ctx, fromRev, send, opts...)
}

// sendBound sends a BOUND event for every pod holding a node at one revision,
// in mod revision order, and returns that revision.
func (s *Store) sendBound(ctx context.Context, send func(*berthv1.BindingEvent) error) (int64, error) {
	type boundPod struct {
		pod *berthv1.Pod
		key string
		rev int64
	}
	var bound []boundPod
	rev, err := s.rangeAt(ctx, "list bindings", s.keys.pods, clientv3.GetPrefixRangeEnd(s.keys.pods), 0,
		func(kv *mvccpb.KeyValue) {
			p, err := decodeBindingView(kv.Value)
			if err != nil {
				s.log.Warn("store: skipping undecodable pod", zap.ByteString("key", kv.Key), zap.Error(err))
				return
			}
			if holdsNode(p) {
				bound = append(bound, boundPod{pod: p, key: string(kv.Key), rev: kv.ModRevision})
			}
		})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(bound, func(a, b boundPod) int {
		return cmp.Or(cmp.Compare(a.rev, b.rev), cmp.Compare(a.key, b.key))
	})
	for _, b := range bound {
		if err := send(bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, b.pod, b.rev)); err != nil {
			return 0, err
		}
		if b.pod.GetStatus().GetNodeLost() {
			if err := send(nodeLostEvent(b.pod, b.rev)); err != nil {
				return 0, err
			}
		}
	}
	return rev, nil
}

// watchBindingsFrom follows one etcd watch from revision from, delivering
// the events above *after a revision at a time and advancing it.
//
// The watch spans node leases, nodes (and pod groups) as well as pods, one
// range in one global order: a lease key's deletion is an expiry only if its
// revision does not also write the node's record (see leases.go).
func (s *Store) watchBindingsFrom(ctx context.Context, from int64, after *int64, sendRevision func([]*berthv1.BindingEvent) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The hub's watch has a stream to itself: watches that others open
	// and close on a shared stream (the sync's shares with every per-call
	// watch) can stall it, and the hub feeds every subscriber.
	wctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(wctx), watchStreamKey, "bindings-hub")
	wch := s.client.Watch(wctx, s.keys.nodeLeases,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.keys.pods)), clientv3.WithRev(from), clientv3.WithPrevKV())
	var revision []*berthv1.BindingEvent
	collect := func(ev *berthv1.BindingEvent) error {
		revision = append(revision, ev)
		return nil
	}
	revisionDone := func() error {
		if len(revision) == 0 {
			return nil
		}
		err := sendRevision(revision)
		revision = revision[:0]
		if err != nil {
			return sendError{err}
		}
		return nil
	}
	for resp := range wch {
		if err := watchFailure(resp, "binding watch"); err != nil {
			return err
		}
		if err := s.deliverResponse(resp, after, collect, revisionDone); err != nil {
			return err
		}
	}
	return errWatchClosed
}

// deliverResponse emits the binding events of one watch response above
// *after, advancing it; revisionDone, if set, runs after each revision's.
func (s *Store) deliverResponse(resp clientv3.WatchResponse, after *int64, emit func(*berthv1.BindingEvent) error, revisionDone func() error) error {
	s.metrics.watchEvent("bindings", len(resp.Events))
	// One Txn's events share a revision and arrive in one response, so
	// the threshold moves per response, not per event, and a revision
	// is judged whole.
	seen := *after
	evs := resp.Events
	for i := 0; i < len(evs); {
		rev := evs[i].Kv.ModRevision
		j := i + 1
		for j < len(evs) && evs[j].Kv.ModRevision == rev {
			j++
		}
		if rev > seen {
			if err := s.revisionBindingEvents(evs[i:j], rev, emit); err != nil {
				return err
			}
			if revisionDone != nil {
				if err := revisionDone(); err != nil {
					return err
				}
			}
			*after = rev
		}
		i = j
	}
	return nil
}

// revisionBindingEvents emits the binding events of the changes one
// revision made, in order.
func (s *Store) revisionBindingEvents(evs []*clientv3.Event, rev int64, emit func(*berthv1.BindingEvent) error) error {
	var nodesWritten map[string]bool
	for _, ev := range evs {
		if key := eventKey(ev); s.keys.isNode(key) {
			if nodesWritten == nil {
				nodesWritten = map[string]bool{}
			}
			nodesWritten[s.keys.nodeName(key)] = true
		}
	}
	for _, ev := range evs {
		key := eventKey(ev)
		switch {
		case s.keys.isPod(key):
			// A value that names no node holds none, so it acts as no
			// value at all: most writes (a submission, the binding of a
			// pending pod) then decode one value, or none. (Such a value
			// that would not decode is no longer logged: it yields no
			// event either way.)
			var prev, cur *berthv1.Pod
			if ev.PrevKv != nil && namesNode(ev.PrevKv.Value) {
				prev, _ = decodeBindingView(ev.PrevKv.Value)
			}
			// Unless the pod held a node: an UNBOUND says why from the
			// new value.
			if ev.Type == clientv3.EventTypePut && (holdsNode(prev) || namesNode(ev.Kv.Value)) {
				var err error
				if cur, err = decodeBindingView(ev.Kv.Value); err != nil {
					s.log.Warn("store: skipping undecodable pod", zap.ByteString("key", ev.Kv.Key), zap.Error(err))
				}
			}
			if err := bindingEvents(prev, cur, rev, emit); err != nil {
				return err
			}
		case s.keys.isNodeLease(key) && ev.Type == clientv3.EventTypeDelete:
			if name := s.keys.nodeLeaseName(key); !nodesWritten[name] {
				if err := emit(&berthv1.BindingEvent{
					Type:     berthv1.BindingEventType_BINDING_EVENT_TYPE_NODE_LOST,
					NodeName: name,
					Revision: rev,
					Message:  "node " + name + " lease expired",
				}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// namesNode tells whether an encoded pod's node_name (its last occurrence,
// as a decode keeps) is set: if not, the pod holds no node. A value that
// does not parse counts as naming one, for the decode to report it.
func namesNode(b []byte) bool {
	named := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return true
		}
		if num == podNodeNameField && typ == protowire.BytesType {
			// An empty value is its length alone: one byte.
			named = m > 1
		}
		b = b[n+m:]
	}
	return named
}

// decodeBindingView decodes only the fields of an encoded pod that its
// binding events read: namespace, name, uid, node_name and status. The binding watch
// decodes two pod values per pod write; the rest of a pod (containers,
// labels, affinity) was most of that work and none of what it reads.
// For every value decodePod accepts, it gives the same fields as decodePod.
func decodeBindingView(b []byte) (*berthv1.Pod, error) {
	p := &berthv1.Pod{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("store: decode pod: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, fmt.Errorf("store: decode pod: %w", protowire.ParseError(m))
		}
		field := b[n : n+m]
		b = b[n+m:]
		if typ != protowire.BytesType {
			// None of the view's fields: a full decode, too, takes a known
			// field of the wrong wire type for an unknown one.
			continue
		}
		body, _ := protowire.ConsumeBytes(field)
		var dst *string
		switch num {
		case podNamespaceField:
			dst = &p.Namespace
		case podNameField:
			dst = &p.Name
		case podUIDField:
			dst = &p.Uid
		case podNodeNameField:
			dst = &p.NodeName
		case podStatusField:
			// Repeated occurrences of a message field merge, as in a full decode.
			if p.Status == nil {
				p.Status = &berthv1.PodStatus{}
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(body, p.Status); err != nil {
				return nil, fmt.Errorf("store: decode pod: %w", err)
			}
			continue
		default:
			continue
		}
		if !utf8.Valid(body) {
			return nil, fmt.Errorf("store: decode pod: field %d: invalid UTF-8", num)
		}
		*dst = string(body)
	}
	return p, nil
}
