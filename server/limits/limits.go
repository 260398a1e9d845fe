// Package limits bounds the shape of every request before any handler sees
// it: enum fields hold a defined value, strings are short and free of NUL,
// repeated fields and maps are small, and the encoded message fits well
// inside one etcd request.
//
// The checks walk the message through protobuf reflection, so a field added
// to the API is bounded the day it is added, with no list to keep in step.
// Fields that need a tighter or looser bound than the defaults are named in
// Defaults' overrides. Semantic rules (DNS names, label syntax, operators that
// need values) stay in the server's validators; this package only keeps one
// request from costing Berth more than it should.
package limits

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Bound is the most a field may hold: characters of a string, entries of a
// repeated field or map. Zero means the Limits' default.
type Bound int

// Limits holds the defaults and the per-field overrides.
type Limits struct {
	// MaxString is the default bound on a string field's length in bytes.
	MaxString int
	// MaxItems is the default bound on entries of a repeated field or map.
	MaxItems int
	// MaxObjectBytes bounds the encoded size of every message whose type is
	// in Objects: what the store writes as one etcd value.
	MaxObjectBytes int
	// Objects names the message types that are stored whole.
	Objects map[protoreflect.FullName]bool
	// Fields overrides the defaults for single fields, by full name
	// ("berth.v1.Pod.tolerations"). For a map the bound counts entries; its
	// keys and values are strings bounded by MaxString.
	Fields map[protoreflect.FullName]Bound
	// PerItem names repeated fields whose length Check bounds but whose
	// items it does not walk: the handler checks each item on its own, so
	// one bad item is reported for that item instead of failing the batch.
	PerItem map[protoreflect.FullName]bool
}

// Violation is one field over its bound, named by its path in the request
// ("pod.tolerations[3].value").
type Violation struct {
	Field       string
	Description string
}

// Check walks m and returns every violation it finds, at most maxViolations
// of them, so a hostile request cannot make the answer large either.
func (l *Limits) Check(m proto.Message) []Violation {
	c := checkers.Get().(*checker)
	c.limits = l
	c.message(nil, m.ProtoReflect())
	found := c.found
	c.reset()
	checkers.Put(c)
	return found
}

// checkers recycles checkers, each with its path nodes and its callbacks
// for the reflective Range calls, bound once: a closure per message or map
// walked was most of the allocations a check made.
var checkers = sync.Pool{New: func() any { return newChecker() }}

func newChecker() *checker {
	c := new(checker)
	c.visitField, c.visitEntry = c.rangeField, c.rangeEntry
	return c
}

// reset lets go of everything from the last request (the levels hold its
// map keys) and keeps the callbacks.
func (c *checker) reset() {
	c.limits, c.found, c.depth, c.at = nil, nil, 0, walkFrame{}
	c.levels = [maxPathDepth]fieldPath{}
}

const maxViolations = 20

type checker struct {
	limits *Limits
	found  []Violation
	// levels holds the walk's path nodes, one per level of nesting, each
	// reused for every field at its level: a node is only read while the
	// walk is below it, and a violation spells its path out at once.
	// Allocating a node per message, map and list was most of the bytes a
	// check allocated.
	levels [maxPathDepth]fieldPath
	depth  int
	// at is what the Range callbacks work on: the innermost message or map
	// being walked. A walk one level down saves and restores it.
	at         walkFrame
	visitField func(protoreflect.FieldDescriptor, protoreflect.Value) bool
	visitEntry func(protoreflect.MapKey, protoreflect.Value) bool
}

// walkFrame is one message's or map's walk in progress.
type walkFrame struct {
	path  *fieldPath // the field's node, or a map value's
	key   *fieldPath // a map key's node
	field protoreflect.FieldDescriptor
	size  int64 // the bound on the encoded size so far
}

// maxPathDepth is how deep the walk nests before its path nodes come from
// the heap; Berth's messages nest less than half as deep.
const maxPathDepth = 24

// push returns a node for the next level, below parent.
func (c *checker) push(parent *fieldPath, kind pathKind) *fieldPath {
	c.depth++
	if c.depth > len(c.levels) {
		return &fieldPath{parent: parent, kind: kind}
	}
	p := &c.levels[c.depth-1]
	*p = fieldPath{parent: parent, kind: kind}
	return p
}

func (c *checker) pop() { c.depth-- }

// fieldPath is where a field sits in the request. It is spelled out only
// for a violation: building the string of every field walked was most of
// what checking a valid request cost.
type fieldPath struct {
	parent *fieldPath
	kind   pathKind
	name   string // the field name, or the printable map key
	index  int    // the list index
}

type pathKind uint8

const (
	pathField    pathKind = iota // parent.name
	pathItem                     // parent[index]
	pathMapKey                   // parent[key]: the key itself
	pathMapEntry                 // parent[name]: the value under a key
)

func (p *fieldPath) String() string {
	if p == nil {
		return ""
	}
	return string(p.appendTo(nil))
}

func (p *fieldPath) appendTo(b []byte) []byte {
	if p == nil {
		return b
	}
	b = p.parent.appendTo(b)
	switch p.kind {
	case pathField:
		if p.parent != nil {
			b = append(b, '.')
		}
		return append(b, p.name...)
	case pathItem:
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p.index), 10)
		return append(b, ']')
	case pathMapKey:
		return append(b, "[key]"...)
	default:
		b = append(b, '[')
		b = append(b, printable(p.name)...)
		return append(b, ']')
	}
}

func (c *checker) add(path *fieldPath, format string, args ...any) {
	if len(c.found) >= maxViolations {
		return
	}
	c.found = append(c.found, Violation{Field: path.String(), Description: fmt.Sprintf(format, args...)})
}

func (c *checker) full() bool { return len(c.found) >= maxViolations }

// wireOverhead bounds what the encoding adds to one value beyond its
// content: a tag (at most 5 bytes) and a length prefix (at most 5), or a
// varint (at most 10 bytes, then all of the value).
const wireOverhead = 16

// unwalked stands for the size of a list whose items the walk leaves to
// the handler (PerItem): unknown, so an object holding one is measured.
const unwalked = 1 << 40

// message checks m and returns an upper bound on its encoded size, which
// spares proto.Size (a second walk, through reflection) for every object
// whose bound is already within MaxObjectBytes: all but the largest.
func (c *checker) message(path *fieldPath, m protoreflect.Message) int64 {
	before := len(c.found)
	// One path per level, renamed for each field.
	outer := c.at
	c.at = walkFrame{path: c.push(path, pathField), size: int64(len(m.GetUnknown()))}
	m.Range(c.visitField)
	size := c.at.size
	c.at = outer
	c.pop()
	// The fields over their bounds say best what to fix; the object's size
	// is reported only when every field is within its own.
	if size > int64(c.limits.MaxObjectBytes) && len(c.found) == before && c.limits.Objects[m.Descriptor().FullName()] {
		exact := proto.Size(m.Interface())
		if exact > c.limits.MaxObjectBytes {
			c.add(path, "is %d bytes encoded; a stored object may be at most %d", exact, c.limits.MaxObjectBytes)
		}
		size = int64(exact)
	}
	return size
}

func (c *checker) bound(fd protoreflect.FieldDescriptor, fallback int) int {
	if b, ok := c.limits.Fields[fd.FullName()]; ok && b > 0 {
		return int(b)
	}
	return fallback
}

func (c *checker) rangeField(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	c.at.path.name = string(fd.Name())
	// Apart from the sum: a nested walk replaces c.at until it returns.
	size := c.field(c.at.path, fd, v)
	c.at.size += size
	return !c.full()
}

func (c *checker) rangeEntry(k protoreflect.MapKey, v protoreflect.Value) bool {
	fd := c.at.field
	size := c.scalar(c.at.key, fd.MapKey(), k.Value(), c.limits.MaxString)
	c.at.path.name = k.String()
	size += c.single(c.at.path, fd.MapValue(), v)
	c.at.size += size
	return !c.full()
}

// field checks one populated field and returns an upper bound on its
// encoded size.
func (c *checker) field(path *fieldPath, fd protoreflect.FieldDescriptor, v protoreflect.Value) int64 {
	switch {
	case fd.IsMap():
		mp := v.Map()
		if max := c.bound(fd, c.limits.MaxItems); mp.Len() > max {
			c.add(path, "at most %d entries, got %d", max, mp.Len())
			return 0
		}
		outer := c.at
		// Each entry's own tag and length, then its key and value.
		c.at = walkFrame{key: c.push(path, pathMapKey), path: c.push(path, pathMapEntry), field: fd, size: int64(mp.Len()) * wireOverhead}
		mp.Range(c.visitEntry)
		size := c.at.size
		c.at = outer
		c.pop()
		c.pop()
		return size
	case fd.IsList():
		list := v.List()
		if max := c.bound(fd, c.limits.MaxItems); list.Len() > max {
			c.add(path, "at most %d entries, got %d", max, list.Len())
			return 0
		}
		if c.limits.PerItem[fd.FullName()] {
			return unwalked
		}
		item := c.push(path, pathItem)
		var size int64
		for i := 0; i < list.Len() && !c.full(); i++ {
			item.index = i
			size += c.single(item, fd, list.Get(i))
		}
		c.pop()
		return size
	default:
		return c.single(path, fd, v)
	}
}

// single checks one value: a scalar against its bound, a message by
// walking it. It returns an upper bound on the value's encoded size.
func (c *checker) single(path *fieldPath, fd protoreflect.FieldDescriptor, v protoreflect.Value) int64 {
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		return wireOverhead + c.message(path, v.Message())
	}
	return c.scalar(path, fd, v, c.bound(fd, c.limits.MaxString))
}

func (c *checker) scalar(path *fieldPath, fd protoreflect.FieldDescriptor, v protoreflect.Value, maxLen int) int64 {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		n := v.Enum()
		if fd.Enum().Values().ByNumber(n) == nil {
			c.add(path, "unknown %s value %d", fd.Enum().Name(), n)
		}
	case protoreflect.StringKind:
		s := v.String()
		switch {
		case len(s) > maxLen:
			c.add(path, "at most %d bytes, got %d", maxLen, len(s))
		case strings.IndexByte(s, 0) >= 0:
			c.add(path, "must not contain a NUL byte")
		}
		return wireOverhead + int64(len(s))
	case protoreflect.BytesKind:
		b := v.Bytes()
		if len(b) > maxLen {
			c.add(path, "at most %d bytes, got %d", maxLen, len(b))
		}
		return wireOverhead + int64(len(b))
	}
	return wireOverhead
}

// printable keeps a hostile map key from making the violation itself huge or
// unreadable.
func printable(key string) string {
	const max = 64
	if len(key) > max {
		key = key[:max] + "..."
	}
	quoted := strconv.Quote(key)
	return quoted[1 : len(quoted)-1]
}
