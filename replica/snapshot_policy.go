package replica

import "sync"

// snapshotLogShare: a periodic write waits until the change log a crash
// restart would replay after the file has grown to 1/snapshotLogShare of
// the file. The log already carries every change, so until then a write
// buys a restart little and costs as much as ever: it reads all of etcd
// (3 s of a core and half a gigabyte of garbage at a million pods), which
// a large cluster taking a trickle of changes used to pay every minute.
const snapshotLogShare = 4

// logWarrantsWrite tells whether a periodic write pays for itself: the log
// a restart would replay has reached its share of the file, or it does
// not continue a file at all (none written yet, or frames dropped since a
// log write failed).
func (s *snapshots) logWarrantsWrite() bool {
	if s.written.Load() == 0 || s.changes.Broken() {
		return true
	}
	logged, file := s.replay.sizes()
	return logged*snapshotLogShare >= file
}

// replayLog accounts for the change log a restart would replay after the
// snapshot file: the bytes of the frames with changes past the file's
// revision (a restart skips the others). A write tells the revision it
// read only when it returns, and the sync keeps logging meanwhile: those
// frames are kept until then and counted only if they reach past it.
type replayLog struct {
	mu        sync.Mutex
	covered   int64 // the file's revision (after its log, for a loaded one)
	fileBytes int64 // 0: unknown
	logged    int64 // bytes of frames past covered
	writing   bool
	during    []loggedFrame // frames logged while a write runs
}

type loggedFrame struct{ newest, bytes int64 }

// frame counts a frame whose newest change is at revision newest.
func (l *replayLog) frame(newest int64, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if newest <= l.covered {
		return
	}
	l.logged += int64(bytes)
	if l.writing {
		l.during = append(l.during, loggedFrame{newest, int64(bytes)})
	}
}

// loaded starts from a snapshot read at start: the file and the frames of
// its change logs that continued it (logBytes), which reach rev, stay what
// a restart replays until the next write.
func (l *replayLog) loaded(rev, fileBytes, logBytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.covered, l.fileBytes, l.logged = rev, fileBytes, logBytes
}

func (l *replayLog) writeBegins() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writing, l.during = true, l.during[:0]
}

// writeEnds follows writeBegins; ok: a file of fileBytes at rev was
// written.
func (l *replayLog) writeEnds(ok bool, rev, fileBytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.covered, l.fileBytes, l.logged = rev, fileBytes, 0
		for _, f := range l.during {
			if f.newest > rev {
				l.logged += f.bytes
			}
		}
	}
	l.writing, l.during = false, nil
}

func (l *replayLog) sizes() (logged, fileBytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logged, l.fileBytes
}
