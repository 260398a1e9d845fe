package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// SyncHandler receives a replica's view of nodes and pods from Sync. Calls
// come from one goroutine, in revision order. Reset means "replace
// everything you hold with this"; it comes first, and again whenever Sync had
// to list anew.
type SyncHandler interface {
	Reset(nodes []*berthv1.Node, pods []PodRecord, rev int64)
	NodePut(n *berthv1.Node, rev int64)
	NodeDeleted(name string, rev int64)
	// PodPut reports a created or changed pod and its previous value
	// (none on creation, or for a NoPrevHandler), which the handler
	// decodes if it needs it.
	PodPut(p PodRecord, prev PrevPod)
	// PodDeleted reports a removed pod with its last value (or, for a
	// NoPrevHandler or if etcd could not supply it, only its namespace and
	// name) and the revision of the delete.
	PodDeleted(prev *berthv1.Pod, rev int64)
}

// PrevPod is a pod's value before a watched change, decoded only when
// asked for: decoding it cost as much as decoding the change, and the
// replica's handler never looks at it.
type PrevPod struct{ value []byte }

// Pod decodes the previous value: nil if there was none or it does not
// decode.
func (p PrevPod) Pod() *berthv1.Pod {
	if p.value == nil {
		return nil
	}
	pod, err := decodePod(p.value)
	if err != nil {
		return nil
	}
	return pod
}

// StoredPodHandler is an optional part of a SyncHandler that converts pods
// from their stored values into a form of its own, which costs less than
// decoding them into *berthv1.Pod first (at a restart, most of the work).
// Sync then hands it PodRecords whose Pod is nil, in Reset and PodPut, and
// the handler skips the values it cannot convert, as Sync skips the
// undecodable ones for other handlers. The values are the handler's to
// keep, except in the Reset of a Snapshot's Load: those are lent for the
// call only, so that the file they are read from can go.
type StoredPodHandler interface {
	SyncHandler
	ConvertsStoredPods()
}

// LendingHandler is an optional part of a StoredPodHandler. Before the
// Reset of a Snapshot's Load it is handed giveBack, which lets the files
// the pods' values are lent from go; the handler calls it as soon as it no
// longer reads those values, which may be long before its Reset returns.
// At a million pods the files are about half a gigabyte of mapped pages,
// and the rest of a Reset builds the cache beside them: the restart's peak.
// Load gives them back after the Reset in any case.
type LendingHandler interface {
	StoredPodHandler
	Lend(giveBack func())
}

// NoPrevHandler is an optional part of a SyncHandler that never reads a
// pod's previous value. Sync then watches without previous values, which
// etcd reads back from its database for each change it sends to a watch
// that asks (for this watch, about 3% of a replica's CPU under a binding
// load): PodPut's PrevPod is empty, and PodDeleted gets the pod's
// namespace and name only.
type NoPrevHandler interface {
	SyncHandler
	IgnoresPrev()
}

// AppliedHandler is an optional part of a SyncHandler: Applied(rev) says
// that every change up to rev has been delivered. It comes after Reset and
// after each watch response, never inside one etcd revision: a Txn's events
// arrive in one response, so a reader of the handler's state sees whole
// transactions only.
type AppliedHandler interface {
	Applied(rev int64)
}

// ListedHandler is an optional part of a SyncHandler: Listed comes when a
// listing has been read, before the resets that hand it over, so the
// handler can tell reading from loading.
type ListedHandler interface {
	Listed(rev int64, nodes, pods int)
}

// BudgetHandler is an optional part of a SyncHandler: a handler that also
// implements it is told about disruption budgets. BudgetsReset comes just
// before each Reset.
type BudgetHandler interface {
	BudgetsReset(budgets []*berthv1.DisruptionBudget)
	BudgetPut(b *berthv1.DisruptionBudget, rev int64)
	BudgetDeleted(namespace, name string, rev int64)
}

// PodGroupHandler is an optional part of a SyncHandler: a handler that
// also implements it is told about pod groups. PodGroupsReset comes just
// before each Reset, so pods arrive knowing their groups.
type PodGroupHandler interface {
	PodGroupsReset(groups []*berthv1.PodGroup)
	PodGroupPut(g *berthv1.PodGroup, rev int64)
	PodGroupDeleted(namespace, name string, rev int64)
}

// NodeLeaseHandler is an optional part of a SyncHandler: a handler that
// also implements it is told which nodes hold a live lease (see leases.go)
// and, since that is when it cannot learn them from NodePut, the mod
// revision of every node listed. NodeLeasesReset comes just before each
// Reset. A lease key deleted at a revision that does not write the node's
// record (an event just before, in the same revision) means the lease
// expired.
type NodeLeaseHandler interface {
	NodeLeasesReset(leased []string, nodeRevisions map[string]int64)
	NodeLeasePut(name string, rev int64)
	NodeLeaseDeleted(name string, rev int64)
}

// AssumptionHandler is an optional part of a SyncHandler: a handler that
// also implements it is told about assumptions (every replica's, its own
// included: Assumption.Replica says whose), so it can count the room that
// other replicas' waiting gang members hold. AssumptionsReset comes just
// after each Reset, so the pods it names are known.
type AssumptionHandler interface {
	AssumptionsReset(as []Assumption)
	AssumptionPut(a Assumption, rev int64)
	AssumptionDeleted(namespace, name string, rev int64)
}

// scanChunk is how many keys one range request of a scan (a full listing,
// a filtered page) reads.
const scanChunk = 1000

// errWatchClosed reports a watch channel that closed while its context was
// still live.
var errWatchClosed = errors.New("store: watch closed")

// Sync feeds h: it lists every node and pod (and, for optional handlers,
// budgets, pod groups, node leases and assumptions) at one revision R, calls Reset,
// then watches both from R+1 and delivers each change in order. When the
// watch fails (compacted past, stream lost) it lists again and calls Reset
// again. It blocks until ctx ends (returning ctx's error) or the store is
// closed (ErrClosed).
func (s *Store) Sync(ctx context.Context, h SyncHandler) error {
	bo := newBackoff()
	for {
		listed, err := s.syncOnce(ctx, h)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.isClosed() {
			return ErrClosed
		}
		s.metrics.relist()
		s.log.Warn("store sync: listing again", zap.Error(err))
		if listed {
			bo.reset()
		}
		if listed && errors.Is(err, ErrCompacted) {
			continue // fell behind: list again at once
		}
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
}

// syncOnce lists, resets h and follows the watch until it fails. listed
// tells whether Reset was called.
func (s *Store) syncOnce(ctx context.Context, h SyncHandler) (listed bool, err error) {
	l, err := s.listForSync(ctx, h)
	if err != nil {
		return false, err
	}
	if lh, ok := h.(ListedHandler); ok {
		lh.Listed(l.rev, len(l.nodes), len(l.pods))
	}
	l.reset(h)
	return true, s.followSync(ctx, h, l.rev)
}

// syncListing is everything a handler is reset with, read at one revision.
type syncListing struct {
	rev         int64
	nodes       []*berthv1.Node
	nodeRevs    map[string]int64
	pods        []PodRecord
	budgets     []*berthv1.DisruptionBudget
	groups      []*berthv1.PodGroup // only for a PodGroupHandler
	assumptions []Assumption        // only for an AssumptionHandler
	leased      []string            // only for a NodeLeaseHandler
}

// reset hands the listing to h: budgets, groups and leases before the
// nodes and pods that refer to them, assumptions after the pods they
// reserve for, and the revision last.
func (l *syncListing) reset(h SyncHandler) {
	if bh, ok := h.(BudgetHandler); ok {
		bh.BudgetsReset(l.budgets)
	}
	if gh, ok := h.(PodGroupHandler); ok {
		gh.PodGroupsReset(l.groups)
	}
	if lh, ok := h.(NodeLeaseHandler); ok {
		lh.NodeLeasesReset(l.leased, l.nodeRevs)
	}
	h.Reset(l.nodes, l.pods, l.rev)
	if ah, ok := h.(AssumptionHandler); ok {
		ah.AssumptionsReset(l.assumptions)
	}
	if applied, ok := h.(AppliedHandler); ok {
		applied.Applied(l.rev)
	}
}

// followSync delivers the watch's events after rev to h until the watch
// fails.
func (s *Store) followSync(ctx context.Context, h SyncHandler, rev int64) error {
	return s.followSyncTo(ctx, h, rev, 0, nil)
}

// followSyncTo is followSync that also calls caughtUp(target) once, when
// every change up to target has been delivered: at an event of target or
// later, or at a progress notification, which etcd sends only to a watch
// that has caught up with it.
func (s *Store) followSyncTo(ctx context.Context, h SyncHandler, rev, target int64, caughtUp func(int64)) error {
	applied, _ := h.(AppliedHandler)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	behind := caughtUp != nil
	if behind && target <= rev {
		caughtUp(target)
		behind = false
	}
	start, end := s.keys.cachedRange()
	// A stream of its own: short-lived watches that end in a burst can
	// wedge the stream they share (see catchUp), and this one feeds the
	// scheduler.
	wctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(wctx), watchStreamKey, "sync")
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithRev(rev + 1)}
	if _, ignores := h.(NoPrevHandler); !ignores {
		opts = append(opts, clientv3.WithPrevKV())
	}
	wch := s.client.Watch(wctx, start, opts...)
	seen := rev  // every change up to seen has been delivered
	shown := rev // every change up to shown has been received
	stopProving := s.proveViews(wctx, seen)
	defer stopProving()
	// Catching up, a handler without previous values gets each pod's last
	// change only (see heldPods). What is held is not delivered yet, so
	// seen moves only when nothing is.
	var held *heldPods
	if behind {
		s.WantView(target)
		if _, ignores := h.(NoPrevHandler); ignores {
			held = newHeldPods()
		}
	}
	deliver := func(ev *clientv3.Event) { s.deliver(h, ev) }
	recorded := rev // every change up to recorded is in the change log
	for resp := range wch {
		if err := watchFailure(resp, "sync watch"); err != nil {
			return err
		}
		s.metrics.watchEvent("sync", len(resp.Events))
		for _, ev := range resp.Events {
			if held != nil && s.keys.isPod(eventKey(ev)) {
				held.add(ev)
				continue
			}
			deliver(ev)
		}
		if n := len(resp.Events); n > 0 {
			shown = max(shown, resp.Events[n-1].Kv.ModRevision)
		} else if resp.IsProgressNotify() {
			// etcd notifies a watch of progress only once it has sent
			// every change up to the header's revision.
			shown = max(shown, resp.Header.Revision)
		}
		caught := behind && reached(resp, target)
		if held != nil && (caught || held.full()) {
			held.flush(deliver)
		}
		if held.len() == 0 && shown > seen {
			seen = shown
			s.views.shown(seen)
			if applied != nil {
				applied.Applied(seen)
			}
		}
		if s.changes != nil && shown > recorded {
			s.changes.record(recorded, shown, resp.Events)
			recorded = shown
		}
		if caught {
			behind, held = false, nil
			caughtUp(target)
		}
	}
	return errWatchClosed
}

// reached tells whether a watch response shows every change up to target
// delivered.
func reached(resp clientv3.WatchResponse, target int64) bool {
	if n := len(resp.Events); n > 0 {
		return resp.Events[n-1].Kv.ModRevision >= target
	}
	return resp.IsProgressNotify() && resp.Header.Revision >= target
}

// deliver hands one watched change to the part of h that handles its key.
func (s *Store) deliver(h SyncHandler, ev *clientv3.Event) {
	key := eventKey(ev)
	switch {
	case s.keys.isAssume(key):
		if ah, ok := h.(AssumptionHandler); ok {
			deliverRecord(s, ev, "assumption", s.keys.assumeName, decodeAssumption, ah.AssumptionDeleted, ah.AssumptionPut)
		}
	case s.keys.isBudget(key):
		if bh, ok := h.(BudgetHandler); ok {
			deliverRecord(s, ev, "budget", s.keys.budgetName, decodeBudget, bh.BudgetDeleted, bh.BudgetPut)
		}
	case s.keys.isGroup(key):
		if gh, ok := h.(PodGroupHandler); ok {
			deliverRecord(s, ev, "pod group", s.keys.groupName, decodePodGroup, gh.PodGroupDeleted, gh.PodGroupPut)
		}
	case s.keys.isNodeLease(key):
		if lh, ok := h.(NodeLeaseHandler); ok {
			if ev.Type == clientv3.EventTypeDelete {
				lh.NodeLeaseDeleted(s.keys.nodeLeaseName(key), ev.Kv.ModRevision)
			} else {
				lh.NodeLeasePut(s.keys.nodeLeaseName(key), ev.Kv.ModRevision)
			}
		}
	case s.keys.isNode(key):
		s.deliverNode(h, ev)
	case s.keys.isPod(key):
		s.deliverPod(h, ev)
	}
}

// deliverRecord hands a change of a namespaced record (an assumption, a
// budget, a pod group) to its handler: deleted with the name its key
// splits into, or put decoded; an undecodable value is logged and skipped.
func deliverRecord[T any](s *Store, ev *clientv3.Event, what string, name func(key string) (namespace, name string),
	decode func([]byte) (T, error), deleted func(namespace, name string, rev int64), put func(T, int64)) {
	key, rev := eventKey(ev), ev.Kv.ModRevision
	if ev.Type == clientv3.EventTypeDelete {
		ns, n := name(key)
		deleted(ns, n, rev)
		return
	}
	v, err := decode(ev.Kv.Value)
	if err != nil {
		s.log.Warn("store sync: skipping undecodable "+what, zap.String("key", key), zap.Error(err))
		return
	}
	put(v, rev)
}

func (s *Store) deliverNode(h SyncHandler, ev *clientv3.Event) {
	key, rev := eventKey(ev), ev.Kv.ModRevision
	if ev.Type == clientv3.EventTypeDelete {
		h.NodeDeleted(s.keys.nodeName(key), rev)
		return
	}
	n, err := decodeNode(ev.Kv.Value)
	if err != nil {
		s.log.Warn("store sync: skipping undecodable node", zap.String("key", key), zap.Error(err))
		return
	}
	h.NodePut(n, rev)
}

// deliverPod decodes the previous value only for a delete, where
// handlers need it to undo what the pod held (or its name alone when there
// is none, as for a NoPrevHandler, or it cannot be decoded); a put passes
// it along undecoded.
func (s *Store) deliverPod(h SyncHandler, ev *clientv3.Event) {
	key, rev := eventKey(ev), ev.Kv.ModRevision
	var prev PrevPod
	if ev.PrevKv != nil {
		prev.value = ev.PrevKv.Value
	}
	if ev.Type == clientv3.EventTypeDelete {
		p := prev.Pod()
		if p == nil {
			ns, name := s.keys.podName(key)
			p = &berthv1.Pod{Namespace: ns, Name: name}
		}
		h.PodDeleted(p, rev)
		return
	}
	if _, ok := h.(StoredPodHandler); ok {
		h.PodPut(PodRecord{ModRevision: rev, Value: ev.Kv.Value}, prev)
		return
	}
	p, err := decodePod(ev.Kv.Value)
	if err != nil {
		s.log.Warn("store sync: skipping undecodable pod", zap.String("key", key), zap.Error(err))
		return
	}
	h.PodPut(PodRecord{Pod: p, ModRevision: rev, Value: ev.Kv.Value}, prev)
}

// watchFailure is why a watch response ends what: the revision it started
// from was compacted (*CompactedError), or the watch failed; nil when the
// response carries events.
func watchFailure(resp clientv3.WatchResponse, what string) error {
	if resp.CompactRevision != 0 {
		return &CompactedError{CompactRevision: resp.CompactRevision}
	}
	if err := resp.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// Paging a scan: a scan hands its caller pages of about these sizes. A
// sync listing, which reads everything once and is a restart's critical
// path, aims for larger pages than other scans. Where etcd has no
// RangeStream (rangestream.go), each page is a range request, and etcd
// counts every key left in the range to answer it, so a scan of n keys in
// pages of c costs n²/c: pages then grow while they are small in bytes,
// which keeps a scan of a million pods nearer linear, and shrink if they
// grow large, which bounds one response's memory.
const (
	scanPageBytes = 4 << 20
	syncPageBytes = 16 << 20
	maxScanChunk  = 1 << 16
)

// nextChunkFor sizes the next page of a scan aiming at pages of target
// bytes.
func nextChunkFor(chunk, pageBytes, target int) int {
	switch {
	case pageBytes < target/2 && chunk < maxScanChunk:
		return min(2*chunk, maxScanChunk)
	case pageBytes > 2*target && chunk > 1:
		return chunk / 2
	}
	return chunk
}

// backoff spaces out retries against an etcd that keeps failing.
type backoff struct{ next time.Duration }

const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 5 * time.Second
)

func newBackoff() *backoff { return &backoff{next: backoffMin} }

func (b *backoff) reset() { b.next = backoffMin }

// wait sleeps for the current delay (or until ctx ends) and doubles it.
func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, backoffMax)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
