package store

import (
	"os"
	"syscall"
)

// readSnapshotFile maps the file read-only instead of reading it: its
// pages come straight from the page cache, populated in one call, with no
// copy into a heap buffer (page faults are a good part of a restart's
// CPU, and a heap buffer the size of the file adds to its peak memory).
// release unmaps it; nothing may use data after.
func readSnapshotFile(path string) (data []byte, release func(), err error) {
	return mapFile(path, syscall.MAP_POPULATE)
}

// mapChangeLog maps a change log without reading it ahead: most of an
// older file's frames precede the snapshot and are skipped unread.
func mapChangeLog(path string) (data []byte, release func(), err error) {
	return mapFile(path, 0)
}

func mapFile(path string, flags int) (data []byte, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close() // a mapping outlives its descriptor
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if info.Size() == 0 {
		return nil, func() {}, nil
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(info.Size()), syscall.PROT_READ, syscall.MAP_SHARED|flags)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { syscall.Munmap(data) }, nil
}
