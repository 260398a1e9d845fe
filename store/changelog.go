package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A start-up snapshot is rewritten from etcd every interval or more (its
// cost grows with the cluster), so a crash under a heavy load found it
// hundreds of thousands of pods behind, and the restart replayed them
// through etcd's watch after the etcd open instead of beside it (issue
// 11). The change log closes that gap: the sync appends every change it
// receives, raw, as etcd sent it, to a file beside the snapshot, one
// frame per watch response; a restart reads the snapshot at R, applies the
// frames after R, and resumes from where the frames end.
//
// The log is an accelerator, never a source of truth: frames are written
// without fsync (a kill -9 keeps what reached the kernel), each carries a
// checksum, and a restart stops at the first frame that does not check or
// does not continue where the one before ended; whatever the frames lack
// the watch replays, and the whole result is checked against etcd as the
// snapshot alone was.
//
// Each successful snapshot write rotates the log: the file being written
// is kept if a frame in it reaches past the snapshot, older ones are
// removed, and a new one begins. A snapshot at R is read from etcd after
// the previous rotation, so every change after R is in the two newest
// files.
//
// File layout: magic "BERTHCLG", format version (uvarint); then frames:
//
//	body length (4 bytes LE), body, CRC-32C of the body (4 bytes LE)
//	body: from, to (uvarints): the frame holds every change in (from, to];
//	      then per change: kind (0 put, 1 delete), key length, key,
//	      for a put value length and value, mod revision (uvarints)
const (
	changeLogMagic   = "BERTHCLG"
	changeLogVersion = 1
	changePut        = 0
	changeDelete     = 1
	// changeLogMaxFrame bounds a frame read back: a watch response holds at
	// most etcd's response size, far below it; a larger length is damage.
	changeLogMaxFrame = 1 << 30
	// changeLogMaxFile bounds one file, should snapshot writes keep
	// failing (a file normally ends at the next write): past it frames
	// are dropped until a write succeeds, and a restart replays the rest
	// from etcd. A million pods loaded at full speed put about 7 MB/s in
	// the log, so it allows ten minutes of that.
	changeLogMaxFile = 4 << 30
)

// ChangeLog appends the sync's changes beside a start-up snapshot. The
// sync calls record; the snapshot writer calls Rotate after each write.
type ChangeLog struct {
	base string // the snapshot's path; files are base.changes.N
	log  *zap.Logger
	// written, if set, runs after each frame reaches the file, with the
	// revision of its newest change and its size.
	written func(newest int64, bytes int)
	maxFile int64 // changeLogMaxFile; a field for tests

	mu   sync.Mutex
	seq  int // the current file's number
	file *os.File
	size int64 // of file
	// reached is where the current file's last frame ends (0: none yet).
	reached int64
	// broken: a write failed; frames are dropped until the next rotation
	// opens a new file (the gap they leave ends a restart's replay there).
	broken bool
	buf    []byte
}

// OpenChangeLog prepares the change log beside the snapshot at base; its
// first frame opens a file numbered after any already there, which a
// restart may still need. written, if not nil, runs after each frame is
// written, with the revision of its newest change (its start, for a frame
// of none) and its size.
func OpenChangeLog(base string, written func(newest int64, bytes int), log *zap.Logger) *ChangeLog {
	if log == nil {
		log = zap.NewNop()
	}
	seqs := changeLogFiles(base)
	next := 1
	if n := len(seqs); n > 0 {
		next = seqs[n-1] + 1
	}
	return &ChangeLog{base: base, log: log, written: written, seq: next, maxFile: changeLogMaxFile}
}

func changeLogPath(base string, seq int) string {
	return base + ".changes." + strconv.Itoa(seq)
}

// changeLogFiles returns the numbers of the change log files beside base,
// in order.
func changeLogFiles(base string) []int {
	names, _ := filepath.Glob(base + ".changes.*")
	var seqs []int
	for _, name := range names {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, base+".changes.")); err == nil && n > 0 {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	return seqs
}

// record appends the changes in (from, to]: evs, in revision order.
func (c *ChangeLog) record(from, to int64, evs []*clientv3.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return
	}
	if c.file == nil {
		if err := c.openLocked(); err != nil {
			c.failLocked(err)
			return
		}
	}
	b := append(c.buf[:0], 0, 0, 0, 0)
	b = binary.AppendUvarint(b, uint64(from))
	b = binary.AppendUvarint(b, uint64(to))
	newest := from
	for _, ev := range evs {
		newest = ev.Kv.ModRevision
		if ev.Type == clientv3.EventTypeDelete {
			b = append(b, changeDelete)
			b = appendBytes(b, ev.Kv.Key)
		} else {
			b = append(b, changePut)
			b = appendBytes(b, ev.Kv.Key)
			b = appendBytes(b, ev.Kv.Value)
		}
		b = binary.AppendUvarint(b, uint64(ev.Kv.ModRevision))
	}
	body := b[4:]
	binary.LittleEndian.PutUint32(b, uint32(len(body)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(body, castagnoli))
	c.buf = b
	if c.size += int64(len(b)); c.size > c.maxFile {
		c.failLocked(fmt.Errorf("file %d passed %d bytes", c.seq, c.maxFile))
		return
	}
	// One write per frame: what returned is the kernel's, which a kill -9
	// does not lose.
	if _, err := c.file.Write(b); err != nil {
		c.failLocked(err)
		return
	}
	c.reached = to
	if c.written != nil {
		c.written(newest, len(b))
	}
}

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func (c *ChangeLog) openLocked() error {
	f, err := os.OpenFile(changeLogPath(c.base, c.seq), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	header := binary.AppendUvarint([]byte(changeLogMagic), changeLogVersion)
	if _, err := f.Write(header); err != nil {
		f.Close()
		return err
	}
	c.file, c.size = f, int64(len(header))
	return nil
}

func (c *ChangeLog) failLocked(err error) {
	c.log.Warn("start-up change log not written until the next snapshot", zap.Error(err))
	c.broken = true
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
}

// Rotate follows a snapshot written at revision covered: every older file
// is removed, and the current one too unless a frame in it reaches past
// covered (the sync kept logging while the snapshot was read); the next
// frame opens a new file. A file of covered frames only would be read
// past by every restart, and weighed by nothing but the disk it takes:
// after a load of 200,000 pods, 95 MB of them.
func (c *ChangeLog) Rotate(covered int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.seq + 1
	if c.reached > covered {
		keep = c.seq
	}
	c.closeLocked()
	c.removeBefore(keep)
	c.nextLocked()
}

// nextLocked moves on to a new file, opened by the next frame.
func (c *ChangeLog) nextLocked() {
	c.seq++
	c.reached = 0
	c.broken = false
}

// Discard removes every file, the current one included: the snapshot they
// follow did not match etcd, so nothing in them will be of use.
func (c *ChangeLog) Discard() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
	c.removeBefore(c.seq + 1)
	c.nextLocked()
}

// Broken tells whether frames are being dropped since a write failed:
// until the next rotation the log no longer continues the snapshot.
func (c *ChangeLog) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// Close closes the current file; it stays for the next start.
func (c *ChangeLog) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
	c.broken = true
}

func (c *ChangeLog) closeLocked() {
	if c.file != nil {
		if err := c.file.Close(); err != nil {
			c.log.Warn("start-up change log close", zap.Error(err))
		}
		c.file = nil
	}
}

func (c *ChangeLog) removeBefore(seq int) {
	for _, n := range changeLogFiles(c.base) {
		if n < seq {
			if err := os.Remove(changeLogPath(c.base, n)); err != nil && !os.IsNotExist(err) {
				c.log.Warn("start-up change log not removed", zap.Int("file", n), zap.Error(err))
			}
		}
	}
}

// ChangeLogFiles counts the change log files beside the snapshot at base.
func ChangeLogFiles(base string) int { return len(changeLogFiles(base)) }

// RemoveChangeLogs removes the change log files beside the snapshot at
// base.
func RemoveChangeLogs(base string) error {
	for _, n := range changeLogFiles(base) {
		if err := os.Remove(changeLogPath(base, n)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("store: remove change log: %w", err)
		}
	}
	return nil
}
