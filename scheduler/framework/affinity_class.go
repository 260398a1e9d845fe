package framework

import (
	"encoding/binary"
	"slices"
	"sync"
)

// An affinity class groups pods that inter-pod affinity cannot tell apart:
// the same namespace, labels and inter-pod affinity terms. Every term
// matches, or fails to match, all pods of a class alike, and the terms of
// a class's pods match any given pod alike. A cycle can so judge each
// class once instead of each pod on every node: pods made from one
// template share a class.
//
// Classes are numbered by interning an exact encoding of those fields, so
// two pods share a number only if they share a class. The table is
// dropped when it grows past maxAffinityClasses (a cluster whose pods all
// differ), and numbering goes on from where it was, so a number is never
// given to two classes.
const maxAffinityClasses = 1 << 16

var affinityClasses struct {
	mu   sync.Mutex
	ids  map[string]uint64
	last uint64
}

// AffinityClass returns the pod's class number, computed on first use.
func (pi *PodInfo) AffinityClass() uint64 {
	if c := pi.class.Load(); c != 0 {
		return c
	}
	c := affinityClassOf(pi.Pod)
	pi.class.Store(c)
	return c
}

func affinityClassOf(p *Pod) uint64 {
	var buf [512]byte
	key := appendAffinityClass(buf[:0], p)
	affinityClasses.mu.Lock()
	defer affinityClasses.mu.Unlock()
	if id, ok := affinityClasses.ids[string(key)]; ok {
		return id
	}
	if affinityClasses.ids == nil || len(affinityClasses.ids) >= maxAffinityClasses {
		affinityClasses.ids = map[string]uint64{}
	}
	affinityClasses.last++
	affinityClasses.ids[string(key)] = affinityClasses.last
	return affinityClasses.last
}

// appendAffinityClass encodes what inter-pod affinity reads of p. Every
// string is length-prefixed and every list counted, so distinct values
// never encode alike; maps are written in key order.
func appendAffinityClass(b []byte, p *Pod) []byte {
	b = appendString(b, p.Namespace)
	b = appendStringMap(b, p.Labels)
	var aff *PodAffinity
	var anti *PodAntiAffinity
	if a := p.Affinity; a != nil {
		aff, anti = a.PodAffinity, a.PodAntiAffinity
	}
	if aff == nil {
		b = append(b, 0)
	} else {
		b = appendTerms(append(b, 1), aff.Required, aff.Preferred)
	}
	if anti == nil {
		return append(b, 0)
	}
	return appendTerms(append(b, 1), anti.Required, anti.Preferred)
}

func appendTerms(b []byte, required []PodAffinityTerm, preferred []WeightedPodAffinityTerm) []byte {
	b = binary.AppendUvarint(b, uint64(len(required)))
	for i := range required {
		b = appendTerm(b, &required[i])
	}
	b = binary.AppendUvarint(b, uint64(len(preferred)))
	for i := range preferred {
		b = binary.AppendVarint(b, int64(preferred[i].Weight))
		b = appendTerm(b, &preferred[i].Term)
	}
	return b
}

func appendTerm(b []byte, t *PodAffinityTerm) []byte {
	if s := t.LabelSelector; s == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendStringMap(b, s.MatchLabels)
		b = binary.AppendUvarint(b, uint64(len(s.MatchExpressions)))
		for _, r := range s.MatchExpressions {
			b = appendString(b, r.Key)
			b = appendString(b, string(r.Operator))
			b = appendStrings(b, r.Values)
		}
	}
	b = appendStrings(b, t.Namespaces)
	if t.AllNamespaces {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendString(b, t.TopologyKey)
	b = appendStrings(b, t.MatchLabelKeys)
	return appendStrings(b, t.MismatchLabelKeys)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendStringMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	var stack [16]string
	keys := stack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}
