//go:build !linux

package store

import "os"

// readSnapshotFile reads the whole file; release does nothing.
func readSnapshotFile(path string) (data []byte, release func(), err error) {
	data, err = os.ReadFile(path)
	return data, func() {}, err
}

// mapChangeLog reads the whole file; release does nothing.
func mapChangeLog(path string) (data []byte, release func(), err error) {
	return readSnapshotFile(path)
}
