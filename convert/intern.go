package convert

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/berth-io/berth/scheduler/framework"
)

// Pods of one workload repeat the same labels, requests and containers,
// and a decoded pod holds its own copy of each: at hundreds of thousands of
// pods the copies are most of the core's memory. The interner hands out one
// shared value per distinct content instead. Sharing is safe because the
// core never writes into a pod it was given (framework.Pod's contract).
//
// The table is bounded so a client that sends ever new values cannot grow
// it: only short strings and small values are considered, and when it holds
// maxInterned entries or maxInternedBytes of keys it forgets them all and
// starts again. Values already handed out stay valid; only later copies
// stop being shared with them. Values that churn (node names, at a large
// cluster) make it forget often; a workload's labels are then kept once
// more per round, which costs nothing worth counting.
const (
	// maxInternedLen: longer strings (uids, messages) are rarely repeated
	// verbatim, and each would cost the table as much as it could save.
	maxInternedLen = 64
	// maxInternedMapLen is the most entries a shared map or list may have;
	// the canonical key of a bigger one costs more than sharing it saves.
	maxInternedMapLen = 8
	// maxInternedKey is the longest canonical key of a map or list kept.
	maxInternedKey = 1024
	// maxInterned and maxInternedBytes bound the table before it forgets:
	// enough for the distinct label sets of many workloads, and at worst
	// about ten MB (keys, and values no pod holds any longer), small next
	// to the pods it serves.
	maxInterned      = 1 << 14
	maxInternedBytes = 2 << 20
	// maxNodeNames bounds the table of node names, kept apart: a large
	// cluster has more nodes than maxInterned, and in the shared table
	// its names made everything else be forgotten every few thousand
	// pods. A name costs the table a map entry (the string is the pods'),
	// so a quarter million cost a few MB.
	maxNodeNames = 1 << 18
)

type interner struct {
	mu         sync.RWMutex
	strings    map[string]string
	stringMaps map[string]map[string]string
	resources  map[string]framework.ResourceList
	containers map[string][]framework.Container
	// span tables map a field's encoded bytes, tags included, to its
	// shared value (stored.go).
	spanMaps       map[string]map[string]string
	spanResources  map[string]framework.ResourceList
	spanContainers map[string][]framework.Container
	// nodeNames shares node names (a pod's node, its nominated node).
	nodeNames map[string]string
	entries   int
	keyBytes  int
	// key is scratch for canonical keys; lookups with string(key) do not
	// allocate.
	key []byte
}

func newInterner() *interner {
	in := &interner{nodeNames: map[string]string{}}
	in.reset()
	return in
}

// pods is the interner every pod conversion goes through.
var pods = newInterner()

func (in *interner) reset() {
	in.strings = map[string]string{}
	in.stringMaps = map[string]map[string]string{}
	in.resources = map[string]framework.ResourceList{}
	in.containers = map[string][]framework.Container{}
	in.spanMaps = map[string]map[string]string{}
	in.spanResources = map[string]framework.ResourceList{}
	in.spanContainers = map[string][]framework.Container{}
	in.entries, in.keyBytes = 0, 0
}

// added counts one new entry of key, forgetting everything once the table
// is full. Callers hold mu.
func (in *interner) added(key string) {
	in.entries++
	in.keyBytes += len(key)
	if in.entries >= maxInterned || in.keyBytes >= maxInternedBytes {
		in.reset()
	}
}

// strLocked returns a string equal to s, shared with the other equal
// strings it was given, if s is no longer than limit.
func (in *interner) strLocked(s string, limit int) string {
	if s == "" || len(s) > limit {
		return s
	}
	if v, ok := in.strings[s]; ok {
		return v
	}
	in.strings[s] = s
	in.added(s)
	return s
}

// nodeNameLocked is strLocked for node names, in their own table.
func (in *interner) nodeNameLocked(b []byte) string {
	if v, ok := lookupIn(in.nodeNames, b, maxInternedLen); ok {
		return v
	}
	if len(in.nodeNames) >= maxNodeNames {
		in.nodeNames = map[string]string{}
	}
	s := string(b)
	in.nodeNames[s] = s
	return s
}

// nodeNameStrLocked is nodeNameLocked for a name held as a string: it is
// only looked up as bytes, and a new name is copied by the table.
func (in *interner) nodeNameStrLocked(s string) string {
	return in.nodeNameLocked(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// appendString appends s to a canonical key, length first, so that no two
// different sequences of strings give the same key.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// sortedKeys returns m's keys in order, in buf when it is big enough.
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	// Insertion sort: the maps are small, and sort.Strings would allocate.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// stringMap returns a map equal to m, shared with the other equal maps it
// was given.
func (in *interner) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxInternedMapLen {
		return m
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stringMapLocked(m)
}

func (in *interner) stringMapLocked(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxInternedMapLen {
		return m
	}
	var buf [maxInternedMapLen]string
	keys := sortedKeys(m, buf[:])
	b := in.key[:0]
	for _, k := range keys {
		b = appendString(appendString(b, k), m[k])
	}
	in.key = b
	if len(b) > maxInternedKey {
		return m
	}
	if v, ok := in.stringMaps[string(b)]; ok {
		return v
	}
	key := string(b)
	in.stringMaps[key] = m
	in.added(key)
	return m
}

// appendResources appends a canonical key of rl. Callers hold mu.
func appendResources(b []byte, rl framework.ResourceList) []byte {
	var buf [maxInternedMapLen]string
	for _, k := range sortedKeys(rl, buf[:]) {
		b = binary.AppendVarint(appendString(b, k), rl[k])
	}
	return b
}

// resourceListLocked returns a list equal to rl, shared with the other
// equal lists it was given.
func (in *interner) resourceListLocked(rl framework.ResourceList) framework.ResourceList {
	if len(rl) == 0 || len(rl) > maxInternedMapLen {
		return rl
	}
	b := appendResources(in.key[:0], rl)
	in.key = b
	if len(b) > maxInternedKey {
		return rl
	}
	if v, ok := in.resources[string(b)]; ok {
		return v
	}
	key := string(b)
	in.resources[key] = rl
	in.added(key)
	return rl
}

// containerListLocked returns containers equal to cs, shared with the
// other equal lists it was given. Lists with ports are not shared: they are
// rare and their keys long.
func (in *interner) containerListLocked(cs []framework.Container) []framework.Container {
	if len(cs) == 0 || len(cs) > maxInternedMapLen {
		return cs
	}
	b := in.key[:0]
	for i := range cs {
		c := &cs[i]
		if len(c.Ports) > 0 || len(c.Requests) > maxInternedMapLen {
			in.key = b
			return cs
		}
		b = appendString(appendString(b, c.Name), c.Image)
		b = appendResources(binary.AppendUvarint(b, uint64(len(c.Requests))), c.Requests)
	}
	in.key = b
	if len(b) > maxInternedKey {
		return cs
	}
	if v, ok := in.containers[string(b)]; ok {
		return v
	}
	key := string(b)
	// A new list's parts are shared too, with lists that differ from it
	// in another part.
	for i := range cs {
		cs[i].Name = in.strLocked(cs[i].Name, maxInternedLen)
		cs[i].Image = in.strLocked(cs[i].Image, maxInternedKey)
		cs[i].Requests = in.resourceListLocked(cs[i].Requests)
	}
	in.containers[key] = cs
	in.added(key)
	return cs
}

// pod shares p's repeated values, under one lock: a pod's conversion
// takes it once, not once per field. Status messages may be long and are
// shared too: every pod that fits nowhere for one reason has the same.
func (in *interner) pod(p *framework.Pod) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, f := range []*string{&p.Namespace, &p.SchedulerName, &p.PodGroup} {
		*f = in.strLocked(*f, maxInternedLen)
	}
	p.NodeName = in.nodeNameStrLocked(p.NodeName)
	p.Labels = in.stringMapLocked(p.Labels)
	p.NodeSelector = in.stringMapLocked(p.NodeSelector)
	p.Containers = in.containerListLocked(p.Containers)
	if ex := p.Extras; ex != nil { // the pod's own: made by its conversion
		ex.NominatedNodeName = in.nodeNameStrLocked(ex.NominatedNodeName)
		ex.StatusMessage = in.strLocked(ex.StatusMessage, maxInternedKey)
		ex.Overhead = in.resourceListLocked(ex.Overhead)
		ex.InitContainers = in.containerListLocked(ex.InitContainers)
	}
}
