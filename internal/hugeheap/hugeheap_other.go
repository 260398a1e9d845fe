//go:build !linux

package hugeheap

// Advise does nothing where transparent huge pages are not Linux's.
func Advise(int64) (int64, error) { return 0, nil }
