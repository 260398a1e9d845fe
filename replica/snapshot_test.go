package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// A graceful stop keeps the file only when it and its log hold every
// change applied, and the log is no larger than the file or keptLogBytes.
func TestSnapshotCoveredByLog(t *testing.T) {
	for _, tc := range []struct {
		name               string
		written, changesAt int64
		applied            int64
		rejected           bool
		file, logs         []int // sizes; no file if nil
		want               bool
	}{
		{name: "log holds every change", written: 10, changesAt: 7, applied: 7, file: []int{100}, logs: []int{30, 70}, want: true},
		{name: "no log", written: 10, changesAt: 7, applied: 7, file: []int{100}, want: true},
		{name: "short log, larger than a small file", written: 10, changesAt: 7, applied: 7, file: []int{100}, logs: []int{keptLogBytes}, want: true},
		{name: "log larger than keptLogBytes and a small file", written: 10, changesAt: 7, applied: 7, file: []int{100}, logs: []int{keptLogBytes, 1}},
		{name: "long log, no larger than a large file", written: 10, changesAt: 7, applied: 7, file: []int{3 * keptLogBytes}, logs: []int{2 * keptLogBytes, keptLogBytes}, want: true},
		{name: "log larger than a large file", written: 10, changesAt: 7, applied: 7, file: []int{3 * keptLogBytes}, logs: []int{3 * keptLogBytes, 1}},
		{name: "changes applied since the last frame", written: 10, changesAt: 7, applied: 8, file: []int{100}},
		{name: "nothing written yet", changesAt: 7, applied: 7, file: []int{100}},
		{name: "snapshot rejected", written: 10, changesAt: 7, applied: 7, rejected: true, file: []int{100}},
		{name: "file gone", written: 10, changesAt: 7, applied: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), snapshotFileName)
			s := newSnapshots(path, 0, func() int64 { return 0 }, prometheus.NewRegistry(), zap.NewNop())
			s.written.Store(tc.written)
			s.changesAt.Store(tc.changesAt)
			s.rejected.Store(tc.rejected)
			for _, size := range tc.file {
				writeSized(t, path, size)
			}
			for i, size := range tc.logs {
				writeSized(t, fmt.Sprintf("%s.changes.%d", path, i+1), size)
			}
			logBytes, fileBytes, ok := s.coveredByLog(tc.applied)
			if ok != tc.want {
				t.Errorf("covered = %v (log %d bytes, file %d), want %v", ok, logBytes, fileBytes, tc.want)
			}
		})
	}
}

// writeSized makes a file of size bytes, sparse: only its size counts.
func writeSized(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Truncate(int64(size)), f.Close()); err != nil {
		t.Fatal(err)
	}
}
