// Package handoff passes keys to whoever next holds a lock, without
// taking it: the queue's Done and the shard's settle end many attempts at
// once after a group commit, and waiting for the lock there would queue
// them behind the loop that owns it.
package handoff

import "sync/atomic"

// Keys is a lock-free list of keys: any goroutine pushes, and the lock's
// holder takes them all at once. The zero value is empty and ready.
type Keys struct {
	head atomic.Pointer[node]
}

type node struct {
	key  string
	next *node
}

// Push adds key for the next Drain.
func (k *Keys) Push(key string) {
	n := &node{key: key}
	for {
		n.next = k.head.Load()
		if k.head.CompareAndSwap(n.next, n) {
			return
		}
	}
}

// Empty reports whether nothing is waiting.
func (k *Keys) Empty() bool { return k.head.Load() == nil }

// Drain takes every key pushed so far and calls f on each, newest first.
// A key pushed during the drain waits for the next one. It is small
// enough to inline, so the common case, nothing waiting, costs a load
// where every lock is taken.
func (k *Keys) Drain(f func(key string)) {
	if !k.Empty() {
		k.drain(f)
	}
}

func (k *Keys) drain(f func(key string)) {
	for n := k.head.Swap(nil); n != nil; n = n.next {
		f(n.key)
	}
}
