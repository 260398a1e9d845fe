package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"time"
	"unsafe"

	"go.uber.org/zap"
)

// change is one change read back from a change log; key and value alias
// the file's bytes.
type change struct {
	key, value []byte
	modRev     int64
	deleted    bool
}

// replayed is what a snapshot's change logs add to it.
type replayed struct {
	// to is the revision the snapshot plus the changes reflect.
	to int64
	// changes is the last change of each key after the snapshot, in key
	// order.
	changes []change
	frames  int
	// bytes is the size of the frames taken, as framed in their files.
	bytes int64
	// written is when the last file used was written.
	written time.Time
	release func()
}

// replayChangeLogs reads the change logs beside the snapshot at base and
// returns the changes after rev that continue it without a gap. A file
// that cannot be read, or a frame that does not check, ends what is taken
// from that file; a frame that does not start at or before where the last
// one ended ends the replay.
func replayChangeLogs(base string, rev int64, log *zap.Logger) replayed {
	out := replayed{to: rev}
	logs := readChangeLogs(base, log)
	out.release = func() {
		for _, l := range logs {
			l.release()
		}
	}
	// Sized up front: a million changes appended and hashed one by one
	// spent a fifth of the replay growing the slice and the map.
	n := changesAfter(logs, rev)
	out.changes = make([]change, 0, n)
	last := make(map[string]int, n) // key -> index in out.changes
	var frame []change              // one frame's changes after out.to
	for _, l := range logs {
		err, used := l.err, false
		for _, f := range l.frames {
			if f.to <= out.to {
				continue // all before what is already covered
			}
			if !f.intact() {
				err = errors.New("frame checksum mismatch")
				break
			}
			if f.from > out.to {
				log.Info("start-up change log has a gap; the watch replays the rest",
					zap.Int64("covered_to", out.to), zap.Int64("next_from", f.from))
				return out.sorted()
			}
			// A frame counts whole or not at all: the changes are kept
			// only once all of them parsed.
			frame = frame[:0]
			if err := f.each(func(c change) {
				if c.modRev > out.to {
					frame = append(frame, c)
				}
			}); err != nil {
				// The CRC passed: a frame that does not parse was written
				// by something else. Nothing after it can be trusted.
				log.Warn("start-up change log frame not understood", zap.String("file", l.path), zap.Error(err))
				return out.sorted()
			}
			for _, c := range frame {
				k := unsafe.String(unsafe.SliceData(c.key), len(c.key))
				if i, ok := last[k]; ok {
					out.changes[i] = c
					continue
				}
				last[k] = len(out.changes)
				out.changes = append(out.changes, c)
			}
			out.to, out.frames, used = f.to, out.frames+1, true
			out.bytes += int64(len(f.whole)) + 8 // with its length and checksum
		}
		if err != nil {
			log.Info("start-up change log ends early", zap.String("file", l.path), zap.Error(err))
		}
		if used {
			if info, err := os.Stat(l.path); err == nil {
				out.written = info.ModTime()
			}
		}
	}
	return out.sorted()
}

// changeLog is one change log file mapped and split into frames; err says
// why its framing ended early (nil at a clean end).
type changeLog struct {
	path    string
	frames  []changeFrame
	err     error
	release func()
}

// readChangeLogs maps the change logs beside the snapshot at base, oldest
// first, skipping any that cannot be read.
func readChangeLogs(base string, log *zap.Logger) []changeLog {
	var logs []changeLog
	for _, seq := range changeLogFiles(base) {
		path := changeLogPath(base, seq)
		data, release, err := mapChangeLog(path)
		if err != nil {
			log.Warn("start-up change log not read", zap.String("file", path), zap.Error(err))
			continue
		}
		frames, err := changeLogFrames(data)
		logs = append(logs, changeLog{path: path, frames: frames, err: err, release: release})
	}
	return logs
}

// changesAfter counts the changes in the frames that reach past rev: at
// most what a replay from rev takes, and no more than the bytes allow,
// since a frame is counted before its checksum is checked.
func changesAfter(logs []changeLog, rev int64) int {
	n := 0
	for _, l := range logs {
		for _, f := range l.frames {
			if f.to > rev {
				_ = f.each(func(change) { n++ })
			}
		}
	}
	return n
}

func (r replayed) sorted() replayed {
	slices.SortFunc(r.changes, func(a, b change) int { return bytes.Compare(a.key, b.key) })
	return r
}

// changeFrame is one frame's span and undecoded body, its checksum not
// yet verified.
type changeFrame struct {
	from, to int64
	body     []byte
	whole    []byte // the body with its span
	sum      uint32
}

// intact verifies the frame's checksum. Frames the snapshot already
// covers are skipped unverified, so their pages need not be read: a damaged
// span can then only skip a frame that was needed, which leaves a gap the
// replay stops at.
func (f changeFrame) intact() bool { return crc32.Checksum(f.whole, castagnoli) == f.sum }

// changeLogFrames splits a change log file into its frames, up to the
// first whose framing is broken (a write cut short); err says why it
// stopped early, nil at a clean end.
func changeLogFrames(data []byte) ([]changeFrame, error) {
	if len(data) < len(changeLogMagic) || string(data[:len(changeLogMagic)]) != changeLogMagic {
		return nil, errors.New("not a change log")
	}
	r := snapshotReader{buf: data[len(changeLogMagic):]}
	if v := r.uvarint(); r.err != nil || v != changeLogVersion {
		return nil, errors.New("unknown change log version")
	}
	var frames []changeFrame
	rest := r.buf
	for len(rest) > 0 {
		if len(rest) < 8 {
			return frames, errors.New("torn frame header")
		}
		n := binary.LittleEndian.Uint32(rest)
		if n > changeLogMaxFrame || uint64(n)+8 > uint64(len(rest)) {
			return frames, errors.New("torn frame")
		}
		body := rest[4 : 4+n]
		br := snapshotReader{buf: body}
		f := changeFrame{from: int64(br.uvarint()), to: int64(br.uvarint()), whole: body, sum: binary.LittleEndian.Uint32(rest[4+n:])}
		if br.err != nil || f.to < f.from {
			return frames, errors.New("bad frame span")
		}
		f.body = br.buf
		frames = append(frames, f)
		rest = rest[8+n:]
	}
	return frames, nil
}

// each calls fn with every change in the frame, in order.
func (f changeFrame) each(fn func(change)) error {
	r := snapshotReader{buf: f.body}
	for len(r.buf) > 0 {
		kind := r.buf[0]
		r.buf = r.buf[1:]
		var c change
		switch kind {
		case changePut:
			c.key, c.value = r.bytes(), r.bytes()
		case changeDelete:
			c.key, c.deleted = r.bytes(), true
		default:
			return errors.New("unknown change kind")
		}
		c.modRev = int64(r.uvarint())
		if r.err != nil {
			return r.err
		}
		fn(c)
	}
	return nil
}

// applyChanges merges changes (in key order, one per key) into a
// snapshot's records (in key order): a put replaces or adds its key, a
// delete removes it. The result is in key order.
func applyChanges(kvs []snapshotKV, changes []change) []snapshotKV {
	if len(changes) == 0 {
		return kvs
	}
	out := make([]snapshotKV, 0, len(kvs)+len(changes))
	i, j := 0, 0
	for i < len(kvs) || j < len(changes) {
		var cmp int
		switch {
		case i == len(kvs):
			cmp = 1
		case j == len(changes):
			cmp = -1
		default:
			cmp = bytes.Compare(kvs[i].key, changes[j].key)
		}
		if cmp < 0 {
			out = append(out, kvs[i])
			i++
			continue
		}
		c := changes[j]
		if !c.deleted {
			out = append(out, snapshotKV{key: c.key, value: c.value, modRev: c.modRev})
		}
		j++
		if cmp == 0 {
			i++
		}
	}
	return out
}
