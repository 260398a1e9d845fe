package framework

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned when a CycleState holds nothing under a key,
// usually because the PreFilter or PreScore that writes it did not run.
var ErrNotFound = errors.New("framework: not found in cycle state")

// StateKey names one entry of a CycleState. Each plugin keeps its keys
// unexported so no other plugin can read or overwrite its data.
type StateKey string

// StateData is a plugin's per-cycle data.
type StateData interface {
	// Clone returns a copy that the clone's owner may change without
	// affecting the original. Immutable data may return itself.
	Clone() StateData
}

// CycleState is the scratchpad of one scheduling cycle: plugins write what
// they computed once (in PreFilter, PreScore) and read it on every node.
// It is safe for concurrent use. Reads dominate (one per plugin per node,
// from several goroutines) and a cycle holds only a handful of keys, so a
// read is an atomic load and a short scan, with no lock and no hashing.
//
// A cycle writes each key once, so entries are appended to an array inside
// the state and published by count: a write allocates nothing, where a
// copy-on-write slice allocated a new, longer copy for every key (a dozen
// allocations and 3 KB per pod in the shard loop). An entry once published
// never changes. Overwriting or deleting a key, or more keys than the array
// holds, moves the state to a copy-on-write slice (spill) for good.
type CycleState struct {
	inline [inlineStateEntries]stateEntry
	// n counts the published entries of inline.
	n atomic.Int32
	// spill, once set, holds every entry and inline is no longer read.
	spill atomic.Pointer[[]stateEntry]
	mu    sync.Mutex // serializes writers
	// Skip sets are bit masks over the positions of plugins at one
	// extension point of the framework that runs the cycle; set by
	// RunPreFilterPlugins and RunPreScorePlugins, read per node.
	skipFilter uint64
	skipScore  uint64
}

// inlineStateEntries covers the keys a cycle of a plain pod writes under
// the default profile (five); more spill, at the cost of a copy each.
const inlineStateEntries = 8

type stateEntry struct {
	key  StateKey
	data StateData
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState { return &CycleState{} }

// Read returns the data under key, or ErrNotFound.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	es := c.load()
	for i := range es {
		if e := &es[i]; e.key == key {
			return e.data, nil
		}
	}
	return nil, ErrNotFound
}

// Write stores data under key.
func (c *CycleState) Write(key StateKey, data StateData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spill.Load() == nil {
		n := int(c.n.Load())
		fresh := true
		for i := range c.inline[:n] {
			fresh = fresh && c.inline[i].key != key
		}
		if fresh && n < len(c.inline) {
			// Unpublished until n moves past it, so no reader sees it
			// half written.
			c.inline[n] = stateEntry{key: key, data: data}
			c.n.Store(int32(n + 1))
			return
		}
	}
	old := c.load()
	next := make([]stateEntry, 0, len(old)+1)
	for _, e := range old {
		if e.key != key {
			next = append(next, e)
		}
	}
	next = append(next, stateEntry{key: key, data: data})
	c.spill.Store(&next)
}

// Delete removes the data under key.
func (c *CycleState) Delete(key StateKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	next := make([]stateEntry, 0, len(old))
	for _, e := range old {
		if e.key != key {
			next = append(next, e)
		}
	}
	c.spill.Store(&next)
}

// load returns the published entries; the slice must not be changed.
func (c *CycleState) load() []stateEntry {
	if es := c.spill.Load(); es != nil {
		return *es
	}
	return c.inline[:c.n.Load()]
}

// Clone returns a deep copy made with each entry's Clone; nil for nil.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	out := &CycleState{skipFilter: c.skipFilter, skipScore: c.skipScore}
	old := c.load()
	if len(old) <= len(out.inline) {
		for i, e := range old {
			out.inline[i] = stateEntry{key: e.key, data: e.data.Clone()}
		}
		out.n.Store(int32(len(old)))
		return out
	}
	next := make([]stateEntry, len(old))
	for i, e := range old {
		next[i] = stateEntry{key: e.key, data: e.data.Clone()}
	}
	out.spill.Store(&next)
	return out
}

// SetSkipFilterPlugins records which Filter plugins (by position in the
// framework's Filter list) this cycle skips. For the framework runtime.
func (c *CycleState) SetSkipFilterPlugins(mask uint64) { c.skipFilter = mask }

// SkipFilterPlugins returns the mask set by SetSkipFilterPlugins.
func (c *CycleState) SkipFilterPlugins() uint64 { return c.skipFilter }

// SetSkipScorePlugins records which Score plugins (by position in the
// framework's Score list) this cycle skips. For the framework runtime.
func (c *CycleState) SetSkipScorePlugins(mask uint64) { c.skipScore = mask }

// SkipScorePlugins returns the mask set by SetSkipScorePlugins.
func (c *CycleState) SkipScorePlugins() uint64 { return c.skipScore }

// ReadState reads key and asserts its type, so a plugin's getter is one
// line. The error wraps ErrNotFound when the key is absent.
func ReadState[T StateData](c *CycleState, key StateKey) (T, error) {
	var zero T
	v, err := c.Read(key)
	if err != nil {
		return zero, fmt.Errorf("reading %q from cycle state: %w", key, err)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("cycle state %q holds %T, want %T", key, v, zero)
	}
	return t, nil
}
