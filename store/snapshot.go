package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// A start-up snapshot is the cached range (assumptions, budgets, node
// leases, nodes, pod groups, pods) as etcd held it at one revision R,
// written to the data dir beside the embedded etcd. A restart reads it
// while etcd opens, loads the scheduler from it, then checks it against
// etcd and follows the watch from R+1: the full listing, a good part of a
// restart, leaves the critical path. Nothing in the file is trusted until
// it has passed every check (checksum, version, prefix, cluster and member,
// R not compacted nor in the future, key count at R); a file that fails
// one is discarded and the replica lists everything, as without it.
//
// Layout (integers are unsigned varints unless noted):
//
//	magic "BERTHSNP", format version
//	cluster id, member id, revision R, length and text of the pods' key prefix
//	records: key length, key, value length, value, mod revision; in key order
//	trailer: record count (8 bytes LE), CRC-32C of all before it (4 bytes LE)
const (
	snapshotMagic   = "BERTHSNP"
	snapshotVersion = 1
	snapshotTrailer = 12
)

// ErrSnapshotInvalid reports a start-up snapshot that cannot be used.
var ErrSnapshotInvalid = errors.New("store: startup snapshot invalid")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotWrite describes a snapshot written.
type SnapshotWrite struct {
	Revision int64
	Keys     int
	Bytes    int64
	Duration time.Duration
}

// WriteSnapshot writes the cached range at the current revision to path,
// atomically: a temporary file beside it (path+".tmp"), synced, then
// renamed over it. Calls for one path must not overlap. It
// reads etcd a page at a time (the pages of a sync listing, undecoded), so
// its memory is bounded by a page, not by the cluster.
func (s *Store) WriteSnapshot(ctx context.Context, path string) (SnapshotWrite, error) {
	began := time.Now()
	start, end := s.keys.cachedRange()
	cctx, cancel := s.bound(ctx)
	head, err := s.client.Get(cctx, start, clientv3.WithLimit(1))
	cancel()
	if err != nil {
		return SnapshotWrite{}, s.callError(ctx, "snapshot header", err)
	}
	w := SnapshotWrite{Revision: head.Header.Revision}
	// One fixed temporary name: a write cut short by a crash leaves one
	// file behind, which the next write replaces, not one per crash. Only
	// one process writes (etcd locks the data dir), one write at a time.
	tmp, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return w, err
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	sum := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, sum), 1<<20)
	var scratch []byte
	scratch = append(scratch, snapshotMagic...)
	scratch = binary.AppendUvarint(scratch, snapshotVersion)
	scratch = binary.AppendUvarint(scratch, head.Header.ClusterId)
	scratch = binary.AppendUvarint(scratch, head.Header.MemberId)
	scratch = binary.AppendUvarint(scratch, uint64(w.Revision))
	scratch = binary.AppendUvarint(scratch, uint64(len(s.keys.pods)))
	scratch = append(scratch, s.keys.pods...)
	bw.Write(scratch)
	_, err = s.rangePages(ctx, "snapshot", start, end, w.Revision, syncPageBytes, func(kvs []*mvccpb.KeyValue) {
		for _, kv := range kvs {
			scratch = binary.AppendUvarint(scratch[:0], uint64(len(kv.Key)))
			scratch = append(scratch, kv.Key...)
			scratch = binary.AppendUvarint(scratch, uint64(len(kv.Value)))
			bw.Write(scratch)
			bw.Write(kv.Value)
			scratch = binary.AppendUvarint(scratch[:0], uint64(kv.ModRevision))
			bw.Write(scratch)
		}
		w.Keys += len(kvs)
	})
	if err != nil {
		return w, err
	}
	if err := bw.Flush(); err != nil {
		return w, err
	}
	trailer := binary.LittleEndian.AppendUint64(nil, uint64(w.Keys))
	sum.Write(trailer)
	trailer = binary.LittleEndian.AppendUint32(trailer, sum.Sum32())
	if _, err := tmp.Write(trailer); err != nil {
		return w, err
	}
	if err := tmp.Sync(); err != nil {
		return w, err
	}
	info, err := tmp.Stat()
	if err != nil {
		return w, err
	}
	w.Bytes = info.Size()
	if err := tmp.Close(); err != nil {
		return w, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return w, err
	}
	tmp = nil
	syncDir(filepath.Dir(path))
	w.Duration = time.Since(began)
	return w, nil
}

// syncDir makes a rename in dir durable; where a directory cannot be
// synced the rename is merely less durable, which the checks on reading
// cover.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Snapshot is a start-up snapshot read and decoded, not yet checked
// against etcd.
type Snapshot struct {
	// Revision is R, the revision the snapshot reflects; ClusterID and
	// Member name the etcd that wrote it.
	Revision          int64
	ClusterID, Member uint64
	// Written is when the file, or the last change log that continued it,
	// was written (its modification time): etcd's revision was at least
	// Revision by then.
	Written time.Time
	// Keys counts the records; Nodes the nodes decoded, Pods the pods'
	// records (decoded by Load, which skips those that do not decode).
	Keys, Nodes, Pods int
	// BaseRevision is the file's own revision; Revision is past it when
	// the change logs beside it continued it (see changelog.go), by
	// Changes keys changed. BaseWritten is the file's modification time:
	// etcd's revision was at least BaseRevision by then, which may be well
	// before Written.
	BaseRevision int64
	BaseWritten  time.Time
	Changes      int
	// ChangeBytes is the size of the change log frames that continued
	// the file: what a restart replays of the logs, which may also hold
	// frames the file already covers. FileBytes is the file's size.
	ChangeBytes, FileBytes int64

	prefix  string       // the pods' key prefix, which names the keyspace
	listing *syncListing // all but the pods; nil once loaded
	pods    []snapshotKV // the pods' records, undecoded, in the file
	log     *zap.Logger
	loaded  bool
	// release lets the file's bytes go (see readSnapshotFile): Load does,
	// once nothing refers to them.
	release func()
}

// snapshotKV is one record of a snapshot file; key and value alias the
// file's bytes, which are unmapped once the snapshot is loaded: whatever is
// kept is copied.
type snapshotKV struct {
	key, value []byte
	modRev     int64
}

// ReadSnapshot reads, checks (checksum, version, prefix) and decodes the
// snapshot at path, on every core. Whether it still matches etcd is for
// SyncFrom to check. prefix is the store's Config.Prefix.
func ReadSnapshot(path, prefix string, log *zap.Logger) (*Snapshot, error) {
	if log == nil {
		log = zap.NewNop()
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	data, release, err := readSnapshotFile(path)
	if err != nil {
		return nil, err
	}
	sn, kvs, err := parseSnapshot(data)
	if err != nil {
		release()
		return nil, err
	}
	sn.Written, sn.FileBytes = info.ModTime(), info.Size()
	keys := newKeyspace(prefix)
	if sn.prefix != keys.pods {
		release()
		return nil, fmt.Errorf("%w: written for keys under %q, not %q", ErrSnapshotInvalid, sn.prefix, keys.pods)
	}
	sn.BaseRevision, sn.BaseWritten = sn.Revision, sn.Written
	changes := replayChangeLogs(path, sn.Revision, log)
	if changes.frames > 0 {
		kvs = applyChanges(kvs, changes.changes)
		sn.Revision, sn.Keys, sn.Changes, sn.ChangeBytes = changes.to, len(kvs), len(changes.changes), changes.bytes
		if changes.written.After(sn.Written) {
			sn.Written = changes.written
		}
	}
	sn.listing, sn.pods = decodeSnapshot(keys, kvs, log)
	sn.Nodes, sn.Pods, sn.log = len(sn.listing.nodes), len(sn.pods), log
	sn.release = func() { release(); changes.release() }
	return sn, nil
}

// parseSnapshot checks a snapshot file's framing and splits it into
// records.
func parseSnapshot(data []byte) (*Snapshot, []snapshotKV, error) {
	bad := func(why string) (*Snapshot, []snapshotKV, error) {
		return nil, nil, fmt.Errorf("%w: %s", ErrSnapshotInvalid, why)
	}
	if len(data) < len(snapshotMagic)+snapshotTrailer || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return bad("not a snapshot file")
	}
	body, trailer := data[:len(data)-4], data[len(data)-4:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(trailer) {
		return bad("checksum mismatch (torn or damaged file)")
	}
	count := binary.LittleEndian.Uint64(body[len(body)-8:])
	r := snapshotReader{buf: body[len(snapshotMagic) : len(body)-8]}
	if v := r.uvarint(); v != snapshotVersion {
		return bad(fmt.Sprintf("format version %d, want %d", v, snapshotVersion))
	}
	sn := &Snapshot{ClusterID: r.uvarint(), Member: r.uvarint(), Revision: int64(r.uvarint())}
	sn.prefix = string(r.bytes())
	if count > uint64(len(r.buf)) {
		return bad("record count beyond the file")
	}
	kvs := make([]snapshotKV, 0, count)
	for len(r.buf) > 0 && r.err == nil {
		kv := snapshotKV{key: r.bytes(), value: r.bytes()}
		kv.modRev = int64(r.uvarint())
		kvs = append(kvs, kv)
	}
	if r.err != nil {
		return bad(r.err.Error())
	}
	if uint64(len(kvs)) != count {
		return bad(fmt.Sprintf("%d records, trailer says %d", len(kvs), count))
	}
	sn.Keys = len(kvs)
	return sn, kvs, nil
}

// snapshotReader consumes a snapshot's fields; the first error sticks.
type snapshotReader struct {
	buf []byte
	err error
}

func (r *snapshotReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *snapshotReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.err = errors.New("field beyond the file")
		return nil
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b
}

// decodeSnapshot turns a snapshot's records into the listing a sync
// listing would have read, but for the pods, nearly all of it, which are
// returned undecoded: how to decode them depends on the handler (see
// Load). Nodes are decoded on every core but one.
func decodeSnapshot(k keyspace, kvs []snapshotKV, log *zap.Logger) (*syncListing, []snapshotKV) {
	l := &syncListing{nodeRevs: map[string]int64{}}
	var nodeKVs []snapshotKV
	// The records are in key order, so the pods are one run of them: a
	// subslice, not a copy of a few hundred thousand records.
	podStart, podEnd, podsApart := 0, 0, false
	var podKVs []snapshotKV
	for i, kv := range kvs {
		// Only looked at, never kept: names kept are copied below.
		key := unsafe.String(unsafe.SliceData(kv.key), len(kv.key))
		switch {
		case k.isAssume(key):
			if a, err := decodeAssumption(kv.value); err == nil {
				l.assumptions = append(l.assumptions, a)
			} else {
				skipSnapshotRecord(log, "assumption", kv, err)
			}
		case k.isBudget(key):
			if b, err := decodeBudget(kv.value); err == nil {
				l.budgets = append(l.budgets, b)
			} else {
				skipSnapshotRecord(log, "budget", kv, err)
			}
		case k.isNodeLease(key):
			l.leased = append(l.leased, strings.Clone(k.nodeLeaseName(key)))
		case k.isNode(key):
			nodeKVs = append(nodeKVs, kv)
		case k.isGroup(key):
			if g, err := decodePodGroup(kv.value); err == nil {
				l.groups = append(l.groups, g)
			} else {
				skipSnapshotRecord(log, "pod group", kv, err)
			}
		case k.isPod(key):
			switch {
			case podEnd == 0:
				podStart, podEnd = i, i+1
			case podEnd == i && !podsApart:
				podEnd++
			default:
				if !podsApart {
					podKVs, podsApart = slices.Clone(kvs[podStart:podEnd]), true
				}
				podKVs = append(podKVs, kv)
			}
		}
	}
	if !podsApart {
		podKVs = kvs[podStart:podEnd:podEnd]
	}
	nodes, nodeErrs := decodeInParallel(nodeKVs, func(kv snapshotKV) (*berthv1.Node, error) { return decodeNode(kv.value) })
	for i, n := range nodes {
		if nodeErrs[i] != nil {
			skipSnapshotRecord(log, "node", nodeKVs[i], nodeErrs[i])
			continue
		}
		l.nodes = append(l.nodes, n)
		l.nodeRevs[n.Name] = nodeKVs[i].modRev
	}
	return l, podKVs
}

func skipSnapshotRecord(log *zap.Logger, what string, kv snapshotKV, err error) {
	log.Warn("store sync: skipping undecodable "+what+" in snapshot", zap.ByteString("key", kv.key), zap.Error(err))
}

// snapshotPods turns the pods' records into what a handler's Reset takes.
// A StoredPodHandler gets the values as they are, views of the file lent
// for the Reset; any other handler gets them decoded, on every core but
// one, with the values copied out of the file, since the handler may keep
// them (the core keeps pending pods', convert.StoredPodToCore) and the
// file is unmapped after the Reset.
func snapshotPods(h SyncHandler, kvs []snapshotKV, log *zap.Logger) []PodRecord {
	out := make([]PodRecord, 0, len(kvs))
	if _, ok := h.(StoredPodHandler); ok {
		for _, kv := range kvs {
			out = append(out, PodRecord{ModRevision: kv.modRev, Value: kv.value})
		}
		return out
	}
	pods, errs := decodeInParallel(kvs, func(kv snapshotKV) (PodRecord, error) {
		p, err := decodePod(kv.value)
		if err != nil {
			return PodRecord{}, err
		}
		return PodRecord{Pod: p, ModRevision: kv.modRev, Value: bytes.Clone(kv.value)}, nil
	})
	for i, p := range pods {
		if errs[i] != nil {
			skipSnapshotRecord(log, "pod", kvs[i], errs[i])
			continue
		}
		out = append(out, p)
	}
	return out
}

// decodeInParallel decodes kvs on every core but one, left to the etcd
// open this runs beside, each worker taking every n-th record; errs says
// why a record did not decode.
func decodeInParallel[T any](kvs []snapshotKV, decode func(snapshotKV) (T, error)) ([]T, []error) {
	out, errs := make([]T, len(kvs)), make([]error, len(kvs))
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(kvs); i += workers {
				out[i], errs[i] = decode(kvs[i])
			}
		})
	}
	wg.Wait()
	return out, errs
}

// Load resets h with the snapshot's state, as a listing's Reset would (its
// optional handlers included), and then lets the decoded state and the
// file go: h holds it now. Call it once, before SyncFrom.
func (sn *Snapshot) Load(h SyncHandler) {
	// Once only: a second unmap could take a mapping made since.
	release := sync.OnceFunc(sn.release)
	sn.release = func() {}
	sn.listing.rev = sn.Revision
	sn.listing.pods = snapshotPods(h, sn.pods, sn.log)
	if lh, ok := h.(LendingHandler); ok {
		lh.Lend(release)
	}
	sn.listing.reset(h)
	sn.listing, sn.pods = nil, nil
	release()
	sn.loaded = true
}

// CatchUpHandler is an optional part of a SyncHandler loaded from a
// Snapshot. SyncFrom calls exactly one of them first: SnapshotRejected
// when the snapshot does not match etcd (a full listing's Reset follows),
// or CaughtUp once the watch has delivered every change up to rev, etcd's
// revision when the snapshot was checked: from then on h's view is as
// current as a listing's would be.
type CatchUpHandler interface {
	SnapshotRejected(err error)
	CaughtUp(rev int64)
}

// progressEvery is how often a catch-up asks etcd whether the watch has
// caught up; etcd answers only once it has.
const progressEvery = 20 * time.Millisecond

// SyncFrom is Sync for a handler already loaded from sn (see Load); nil
// sn is Sync. It checks sn against etcd: the same cluster and member, R
// neither compacted nor in the future, and as many keys at R as the file
// holds; then follows the watch from R+1. If a check fails, it lists
// everything and resets h, as Sync does.
func (s *Store) SyncFrom(ctx context.Context, h SyncHandler, sn *Snapshot) error {
	if sn == nil || !sn.loaded {
		return s.Sync(ctx, h)
	}
	cu, _ := h.(CatchUpHandler)
	target, err := s.checkSnapshot(ctx, sn)
	if err != nil {
		s.log.Warn("store sync: startup snapshot not used; listing everything", zap.Int64("snapshot_revision", sn.Revision), zap.Error(err))
		if cu != nil {
			cu.SnapshotRejected(err)
		}
	} else {
		s.log.Info("store sync: resuming from startup snapshot", zap.Int64("snapshot_revision", sn.Revision),
			zap.Int64("catch_up_to", target))
		caughtUp := func(int64) {}
		if cu != nil {
			caughtUp = cu.CaughtUp
		}
		err = s.followSyncTo(ctx, h, sn.Revision, target, caughtUp)
		if ctx.Err() == nil && !s.isClosed() {
			s.metrics.relist()
			s.log.Warn("store sync: listing again", zap.Error(err))
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.isClosed() {
		return ErrClosed
	}
	return s.Sync(ctx, h)
}

// checkSnapshot checks sn against etcd with one count-only read at its
// revision, and returns etcd's current revision.
func (s *Store) checkSnapshot(ctx context.Context, sn *Snapshot) (int64, error) {
	start, end := s.keys.cachedRange()
	cctx, cancel := s.bound(ctx)
	resp, err := s.client.Get(cctx, start, clientv3.WithRange(end), clientv3.WithRev(sn.Revision), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		// Compacted past R, or R is newer than etcd (data dir restored
		// from an older backup), or etcd failed: list in every case.
		return 0, s.callError(ctx, "check snapshot", err)
	}
	switch {
	case resp.Header.ClusterId != sn.ClusterID || resp.Header.MemberId != sn.Member:
		return 0, fmt.Errorf("%w: written by cluster %x member %x, etcd is cluster %x member %x", ErrSnapshotInvalid,
			sn.ClusterID, sn.Member, resp.Header.ClusterId, resp.Header.MemberId)
	case resp.Count != int64(sn.Keys):
		return 0, fmt.Errorf("%w: %d keys at revision %d, etcd has %d", ErrSnapshotInvalid, sn.Keys, sn.Revision, resp.Count)
	}
	return resp.Header.Revision, nil
}
