package main

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Resource names whose amounts are bytes, shown with binary suffixes.
func isBytesResource(name string) bool {
	return name == "memory" || name == "ephemeral-storage" || strings.HasPrefix(name, "hugepages-")
}

// suffixes maps a Kubernetes quantity suffix to its multiplier.
var suffixes = map[string]*big.Rat{
	"":   big.NewRat(1, 1),
	"m":  big.NewRat(1, 1000),
	"k":  big.NewRat(1e3, 1),
	"M":  big.NewRat(1e6, 1),
	"G":  big.NewRat(1e9, 1),
	"T":  big.NewRat(1e12, 1),
	"P":  big.NewRat(1e15, 1),
	"E":  big.NewRat(1e18, 1),
	"Ki": big.NewRat(1<<10, 1),
	"Mi": big.NewRat(1<<20, 1),
	"Gi": big.NewRat(1<<30, 1),
	"Ti": big.NewRat(1<<40, 1),
	"Pi": big.NewRat(1<<50, 1),
	"Ei": big.NewRat(1<<60, 1),
}

// parseQuantity parses a Kubernetes-style quantity ("1.5Gi", "500m", "2")
// into the int64 units Berth uses for the named resource: millicores for
// "cpu" (so "2" is 2000 and "500m" is 500), base units (bytes, counts) for
// everything else. Fractions of a unit round up, as Kubernetes does.
func parseQuantity(resource, s string) (int64, error) {
	num, suffix := splitQuantity(s)
	mult, ok := suffixes[suffix]
	if num == "" || !ok || !isDecimal(num) {
		return 0, fmt.Errorf("invalid quantity %q for %s: want a number with an optional suffix (m, k, M, G, T, Ki, Mi, Gi, Ti, ...)", s, resource)
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid quantity %q for %s", s, resource)
	}
	v.Mul(v, mult)
	if resource == "cpu" {
		v.Mul(v, big.NewRat(1000, 1))
	}
	// Round up: Quo truncates toward zero and v is not negative.
	q := new(big.Int).Quo(v.Num(), v.Denom())
	if new(big.Rat).SetInt(q).Cmp(v) < 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("quantity %q for %s is too large", s, resource)
	}
	return q.Int64(), nil
}

// splitQuantity separates the numeric part from the suffix.
func splitQuantity(s string) (num, suffix string) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// isDecimal accepts digits with at most one dot and at least one digit: no
// signs, exponents or fractions, which big.Rat would otherwise take.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case r == '.':
			dots++
		case r >= '0' && r <= '9':
			digits++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// formatQuantity renders an amount the way a person would write it: cpu as
// cores or millicores, bytes with the largest exact binary suffix.
func formatQuantity(resource string, v int64) string {
	switch {
	case resource == "cpu":
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	case isBytesResource(resource) && v != 0:
		for _, s := range []string{"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"} {
			unit := suffixes[s].Num().Int64()
			if v%unit == 0 {
				return strconv.FormatInt(v/unit, 10) + s
			}
		}
	}
	return strconv.FormatInt(v, 10)
}
