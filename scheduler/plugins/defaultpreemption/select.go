package defaultpreemption

import (
	"math"
	"time"
)

// SelectCandidate picks the node to preempt on with kube's rules, each
// deciding only among the nodes tied on all before it:
//  1. fewest budget violations;
//  2. lowest priority of the most important victim;
//  3. smallest sum of victim priorities, each shifted by MaxInt32+1 so a
//     few negative-priority victims never beat fewer of the same;
//  4. fewest victims;
//  5. latest start among the most important victims (the node whose
//     earliest-started top-priority victim started last);
//  6. the first in candidates' order (kube: map order, i.e. random).
//
// Victims of each candidate must be ordered most important first; now
// stands in for missing start times. Nil for no candidates.
func SelectCandidate(candidates []Candidate, now time.Time) *Candidate {
	switch len(candidates) {
	case 0:
		return nil
	case 1:
		return &candidates[0]
	}
	rules := [...]func(c *Candidate) int64{
		func(c *Candidate) int64 { return -c.NumPDBViolations },
		func(c *Candidate) int64 { return -int64(c.Victims[0].Priority) },
		func(c *Candidate) int64 {
			var sum int64
			for _, v := range c.Victims {
				sum += int64(v.Priority) + math.MaxInt32 + 1
			}
			return -sum
		},
		func(c *Candidate) int64 { return -int64(len(c.Victims)) },
		func(c *Candidate) int64 { return earliestTopPriorityStart(c, now).UnixNano() },
	}
	// tied holds candidate indexes still in the running, in order.
	tied := make([]int, len(candidates))
	for i := range tied {
		tied[i] = i
	}
	for _, score := range rules {
		best := int64(math.MinInt64)
		kept := tied[:0]
		for _, i := range tied {
			s := score(&candidates[i])
			if s > best {
				best = s
				kept = kept[:0]
			}
			if s == best {
				kept = append(kept, i)
			}
		}
		tied = kept
		if len(tied) == 1 {
			break
		}
	}
	return &candidates[tied[0]]
}

// earliestTopPriorityStart is the earliest start among the victims that
// share the highest priority.
func earliestTopPriorityStart(c *Candidate, now time.Time) time.Time {
	top := c.Victims[0].Priority
	earliest := startTime(c.Victims[0], now)
	for _, v := range c.Victims[1:] {
		switch s := startTime(v, now); {
		case v.Priority > top:
			top, earliest = v.Priority, s
		case v.Priority == top && s.Before(earliest):
			earliest = s
		}
	}
	return earliest
}
