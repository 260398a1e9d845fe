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
	*c = checker{} // the levels hold names from the request (map keys): let them go
	checkers.Put(c)
	return found
}

// checkers recycles checkers: the map walk's callback makes the checker
// escape, and each holds its path nodes.
var checkers = sync.Pool{New: func() any { return new(checker) }}

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

func (c *checker) message(path *fieldPath, m protoreflect.Message) {
	before := len(c.found)
	// One path per level, renamed for each field. The fields are visited
	// through the descriptor rather than m.Range, whose callback made the
	// path escape to the heap; Has skips what Range would not visit.
	fp := c.push(path, pathField)
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len() && !c.full(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		fp.name = string(fd.Name())
		c.field(fp, fd, m.Get(fd))
	}
	c.pop()
	// The fields over their bounds say best what to fix; the object's size
	// is reported only when every field is within its own. The walk costs
	// no more than proto.Size: both visit the message once.
	if len(c.found) == before && c.limits.Objects[m.Descriptor().FullName()] {
		if size := proto.Size(m.Interface()); size > c.limits.MaxObjectBytes {
			c.add(path, "is %d bytes encoded; a stored object may be at most %d", size, c.limits.MaxObjectBytes)
		}
	}
}

func (c *checker) bound(fd protoreflect.FieldDescriptor, fallback int) int {
	if b, ok := c.limits.Fields[fd.FullName()]; ok && b > 0 {
		return int(b)
	}
	return fallback
}

func (c *checker) field(path *fieldPath, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch {
	case fd.IsMap():
		mp := v.Map()
		if max := c.bound(fd, c.limits.MaxItems); mp.Len() > max {
			c.add(path, "at most %d entries, got %d", max, mp.Len())
			return
		}
		keyPath := c.push(path, pathMapKey)
		entryPath := c.push(path, pathMapEntry)
		mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			c.scalar(keyPath, fd.MapKey(), k.Value(), c.limits.MaxString)
			entryPath.name = k.String()
			c.single(entryPath, fd.MapValue(), mv)
			return !c.full()
		})
		c.pop()
		c.pop()
	case fd.IsList():
		list := v.List()
		if max := c.bound(fd, c.limits.MaxItems); list.Len() > max {
			c.add(path, "at most %d entries, got %d", max, list.Len())
			return
		}
		if c.limits.PerItem[fd.FullName()] {
			return
		}
		item := c.push(path, pathItem)
		for i := 0; i < list.Len() && !c.full(); i++ {
			item.index = i
			c.single(item, fd, list.Get(i))
		}
		c.pop()
	default:
		c.single(path, fd, v)
	}
}

// single checks one value: a scalar against its bound, a message by walking it.
func (c *checker) single(path *fieldPath, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		c.message(path, v.Message())
		return
	}
	c.scalar(path, fd, v, c.bound(fd, c.limits.MaxString))
}

func (c *checker) scalar(path *fieldPath, fd protoreflect.FieldDescriptor, v protoreflect.Value, maxLen int) {
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
	case protoreflect.BytesKind:
		if b := v.Bytes(); len(b) > maxLen {
			c.add(path, "at most %d bytes, got %d", maxLen, len(b))
		}
	}
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
