package store

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
)

func put(key, value string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), ModRevision: rev}}
}

func del(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// replayOnto returns base at rev with the log at path applied, as
// "key=value@rev" in order, and the revision the result reflects.
func replayOnto(t *testing.T, path string, base []snapshotKV, rev int64) ([]string, int64) {
	t.Helper()
	rp := replayChangeLogs(path, rev, zaptest.NewLogger(t))
	defer rp.release()
	var out []string
	for _, kv := range applyChanges(base, rp.changes) {
		out = append(out, string(kv.key)+"="+string(kv.value)+"@"+strconv.FormatInt(kv.modRev, 10))
	}
	return out, rp.to
}

func kvAt(key, value string, rev int64) snapshotKV {
	return snapshotKV{key: []byte(key), value: []byte(value), modRev: rev}
}

// A snapshot at 10 continued by the log: changes at or before 10 are
// already in it, a frame that straddles 10 gives only what follows, the
// last change of a key wins, deletes remove, new keys fall into key order,
// and a torn tail ends the replay at the last whole frame.
func TestChangeLogContinuesTheSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.record(4, 8, []*clientv3.Event{put("a", "old", 6)})
	cl.record(8, 12, []*clientv3.Event{put("b", "in-snapshot", 9), put("c", "2", 11), del("e", 12)})
	cl.record(12, 13, nil) // a progress notification
	cl.record(13, 15, []*clientv3.Event{put("d", "1", 14), put("c", "3", 15)})
	cl.record(15, 20, []*clientv3.Event{put("a", "torn", 20)})
	cl.Close()
	name := changeLogPath(path, 1)
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data[:len(data)-3], 0o600); err != nil {
		t.Fatal(err)
	}

	base := []snapshotKV{kvAt("a", "1", 3), kvAt("b", "in-snapshot", 9), kvAt("c", "1", 5), kvAt("e", "1", 7)}
	got, to := replayOnto(t, path, base, 10)
	want := []string{"a=1@3", "b=in-snapshot@9", "c=3@15", "d=1@14"}
	if !slices.Equal(got, want) || to != 15 {
		t.Errorf("replayed to %d: %v; want 15: %v", to, got, want)
	}
}

// The replay reports the size of the frames it took, as the log wrote them,
// not of the files: frames the snapshot covers are walked past, uncounted.
func TestChangeLogReplayedBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	var sizes []int64
	cl := OpenChangeLog(path, func(_ int64, n int) { sizes = append(sizes, int64(n)) }, zaptest.NewLogger(t))
	cl.record(1, 5, []*clientv3.Event{put("a", strings.Repeat("x", 1000), 5)})
	cl.record(5, 8, []*clientv3.Event{put("b", "8", 8)})
	cl.record(8, 9, []*clientv3.Event{put("a", "9", 9)})
	cl.Close()
	rp := replayChangeLogs(path, 5, zaptest.NewLogger(t))
	defer rp.release()
	if want := sizes[1] + sizes[2]; rp.bytes != want || rp.frames != 2 {
		t.Errorf("replayed %d frames of %d bytes; want 2 of %d (of %d logged)", rp.frames, rp.bytes, want, sizes[0]+want)
	}
}

// Frames must continue one another: after a gap (a relist, a dropped
// frame) nothing more is taken, and what the log does not cover the watch
// replays.
func TestChangeLogStopsAtAGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.record(10, 12, []*clientv3.Event{put("a", "2", 12)})
	cl.record(14, 16, []*clientv3.Event{put("b", "2", 16)})
	cl.Close()
	got, to := replayOnto(t, path, []snapshotKV{kvAt("a", "1", 3)}, 10)
	if want := []string{"a=2@12"}; !slices.Equal(got, want) || to != 12 {
		t.Errorf("replayed to %d: %v; want 12: %v", to, got, want)
	}
	// A log that starts after the snapshot adds nothing.
	got, to = replayOnto(t, path, []snapshotKV{kvAt("a", "1", 3)}, 9)
	if want := []string{"a=1@3"}; !slices.Equal(got, want) || to != 9 {
		t.Errorf("replayed to %d: %v; want 9: %v", to, got, want)
	}
}

// A rotation keeps the file being written if it holds changes after the
// snapshot that caused it, and removes older ones; the replay reads the
// files kept in order, and a new log numbers its files after them.
func TestChangeLogRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.record(1, 2, []*clientv3.Event{put("a", "2", 2)})
	cl.Rotate(1)
	cl.record(2, 3, []*clientv3.Event{put("a", "3", 3)})
	cl.Rotate(2) // file 1 goes
	cl.record(3, 4, []*clientv3.Event{put("b", "4", 4)})
	cl.Close()
	if got := changeLogFiles(path); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("files %v after two rotations, want [2 3]", got)
	}
	got, to := replayOnto(t, path, []snapshotKV{kvAt("a", "2", 2)}, 2)
	if want := []string{"a=3@3", "b=4@4"}; !slices.Equal(got, want) || to != 4 {
		t.Errorf("replayed to %d: %v; want 4: %v", to, got, want)
	}

	next := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	next.record(4, 5, []*clientv3.Event{put("c", "5", 5)})
	next.Rotate(4) // nothing before the restart is needed after a snapshot
	next.Rotate(5) // nothing written since the last: nothing to keep
	if got := changeLogFiles(path); len(got) != 0 {
		t.Errorf("files %v after rotating past every frame, want none", got)
	}
	next.record(5, 6, []*clientv3.Event{put("c", "6", 6)})
	next.Discard()
	next.record(6, 7, []*clientv3.Event{put("c", "7", 7)})
	if got := changeLogFiles(path); len(got) != 1 || got[0] != 7 {
		t.Errorf("files %v after a discard and a frame, want [7]", got)
	}
	next.Close()
}

// A snapshot that covers every frame of the file being written leaves no
// file behind, and a frame that only ends past it (a progress notification)
// is reason enough to keep one: the next file continues from where it ends.
func TestChangeLogRotationDropsCoveredFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.record(1, 2, []*clientv3.Event{put("a", "2", 2)})
	cl.record(2, 3, []*clientv3.Event{put("a", "3", 3)})
	cl.Rotate(3)
	if got := changeLogFiles(path); len(got) != 0 {
		t.Fatalf("files %v after a snapshot covering every frame, want none", got)
	}
	cl.record(3, 4, []*clientv3.Event{put("b", "4", 4)})
	cl.record(4, 6, nil) // progress to 6
	cl.Rotate(5)
	cl.record(6, 7, []*clientv3.Event{put("b", "7", 7)})
	cl.Close()
	if got := changeLogFiles(path); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("files %v, want [2 3]: the second ends past the snapshot at 5", got)
	}
	got, to := replayOnto(t, path, []snapshotKV{kvAt("a", "3", 3), kvAt("b", "4", 4)}, 5)
	if want := []string{"a=3@3", "b=7@7"}; !slices.Equal(got, want) || to != 7 {
		t.Errorf("replayed to %d: %v; want 7: %v", to, got, want)
	}
}

// A damaged frame ends its file's part: the frames after it in that file
// are not used, even if they check, and the next file then has a gap.
func TestChangeLogDamagedFrame(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.record(1, 2, []*clientv3.Event{put("a", "2", 2)})
	cl.record(2, 3, []*clientv3.Event{put("a", "3", 3)})
	cl.Rotate(1)
	cl.record(3, 4, []*clientv3.Event{put("a", "4", 4)})
	cl.Close()
	name := changeLogPath(path, 1)
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-6] ^= 0xff // inside the second frame's value
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, to := replayOnto(t, path, []snapshotKV{kvAt("a", "1", 1)}, 1)
	if want := []string{"a=2@2"}; !slices.Equal(got, want) || to != 2 {
		t.Errorf("replayed to %d: %v; want 2: %v", to, got, want)
	}
}

// A file that outgrows its bound (snapshot writes failing) takes no more
// frames until the next rotation; the replay stops at the gap that leaves.
func TestChangeLogFileBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.maxFile = 64
	cl.record(1, 2, []*clientv3.Event{put("a", "2", 2)})
	cl.record(2, 3, []*clientv3.Event{put("a", strings.Repeat("x", 64), 3)})
	cl.record(3, 4, []*clientv3.Event{put("b", "4", 4)})
	got, to := replayOnto(t, path, []snapshotKV{kvAt("a", "1", 1)}, 1)
	if want := []string{"a=2@2"}; !slices.Equal(got, want) || to != 2 {
		t.Errorf("replayed to %d: %v; want 2: %v", to, got, want)
	}
	cl.Rotate(2)
	cl.record(4, 5, []*clientv3.Event{put("b", "5", 5)})
	cl.Close()
	got, to = replayOnto(t, path, []snapshotKV{kvAt("a", "2", 2)}, 4)
	if want := []string{"a=2@2", "b=5@5"}; !slices.Equal(got, want) || to != 5 {
		t.Errorf("after a rotation replayed to %d: %v; want 5: %v", to, got, want)
	}
}

// A frame whose checksum holds but whose changes do not parse (written by
// something else) ends the replay before it, none of its changes taken.
func TestChangeLogUnparsableFrameIsNotTakenInPart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	cl := OpenChangeLog(path, nil, zaptest.NewLogger(t))
	cl.record(1, 2, []*clientv3.Event{put("a", "2", 2)})
	cl.Close()
	body := binary.AppendUvarint(nil, 2)
	body = binary.AppendUvarint(body, 3)
	body = append(body, changePut)
	body = appendBytes(appendBytes(body, []byte("b")), []byte("3"))
	body = binary.AppendUvarint(body, 3)
	body = append(body, 9) // no such kind
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	frame = append(frame, body...)
	frame = binary.LittleEndian.AppendUint32(frame, crc32.Checksum(body, castagnoli))
	f, err := os.OpenFile(changeLogPath(path, 1), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(frame); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, to := replayOnto(t, path, []snapshotKV{kvAt("a", "1", 1)}, 1)
	if want := []string{"a=2@2"}; !slices.Equal(got, want) || to != 2 {
		t.Errorf("replayed to %d: %v; want 2: %v", to, got, want)
	}
}
