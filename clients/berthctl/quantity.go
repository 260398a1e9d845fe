package main

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// binaryUnits are the suffixes formatQuantity writes bytes with.
var binaryUnits = map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}

// Resource names whose amounts are bytes, shown with binary suffixes.
func isBytesResource(name string) bool {
	return name == "memory" || name == "ephemeral-storage" || strings.HasPrefix(name, "hugepages-")
}

// parseQuantity parses a Kubernetes quantity ("1.5Gi", "500m", "2", "2e3")
// into the int64 units Berth uses for the named resource: millicores for
// "cpu" (so "2" is 2000 and "500m" is 500), base units (bytes, counts) for
// everything else. Fractions of a unit round up, as Kubernetes does.
func parseQuantity(resourceName, s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	// ParseQuantity takes a bare suffix ("Gi") for zero; a person who
	// wrote one forgot the number.
	if err == nil && (s == "" || !strings.ContainsAny(s[:1], "0123456789.+-")) {
		err = resource.ErrFormatWrong
	}
	if err != nil {
		return 0, fmt.Errorf("invalid quantity %q for %s: want a number with an optional suffix (m, k, M, G, T, Ki, Mi, Gi, Ti, ...) or exponent (2e3)", s, resourceName)
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("invalid quantity %q for %s: must not be negative", s, resourceName)
	}
	// The exact decimal, scaled and rounded here rather than with
	// Quantity.MilliValue, which wraps silently on overflow.
	v, ok := new(big.Rat).SetString(q.AsDec().String())
	if !ok {
		return 0, fmt.Errorf("invalid quantity %q for %s", s, resourceName)
	}
	if resourceName == "cpu" {
		v.Mul(v, big.NewRat(1000, 1))
	}
	// Round up: Quo truncates toward zero and v is not negative.
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if new(big.Rat).SetInt(n).Cmp(v) < 0 {
		n.Add(n, big.NewInt(1))
	}
	// Quantity clamps what it cannot hold to MaxInt64, so that is too
	// large as well.
	if !n.IsInt64() || n.Int64() == math.MaxInt64 {
		return 0, fmt.Errorf("quantity %q for %s is too large", s, resourceName)
	}
	return n.Int64(), nil
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
			unit := binaryUnits[s]
			if v%unit == 0 {
				return strconv.FormatInt(v/unit, 10) + s
			}
		}
	}
	return strconv.FormatInt(v, 10)
}
