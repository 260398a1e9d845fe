package main

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
)

// A label selector, as kubectl's -l takes it: requirements separated by
// commas, all of which must hold. The API has no selector field, so lists
// are filtered here, after they arrive.
type selector []requirement

type requirement struct {
	key    string
	op     string // "=", "!=", "in", "notin", "exists", "!exists"
	values []string
}

var (
	setRequirement = regexp.MustCompile(`^([^\s=!(),]+)\s+(in|notin)\s*\(([^()]*)\)$`)
	labelKey       = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`)
)

// parseSelector parses e.g. "app=web,tier!=db", "env in (a,b)", "gpu" or
// "!spot". The empty selector matches everything.
func parseSelector(s string) (selector, error) {
	var sel selector
	for _, term := range splitTerms(s) {
		term = strings.TrimSpace(term)
		if term == "" {
			if strings.TrimSpace(s) == "" {
				return nil, nil
			}
			return nil, fmt.Errorf("invalid selector %q: empty requirement", s)
		}
		r, err := parseRequirement(term)
		if err != nil {
			return nil, fmt.Errorf("invalid selector %q: %w", s, err)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// splitTerms splits at the commas outside parentheses.
func splitTerms(s string) []string {
	var terms []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				terms = append(terms, s[start:i])
				start = i + 1
			}
		}
	}
	return append(terms, s[start:])
}

func parseRequirement(term string) (requirement, error) {
	var r requirement
	switch {
	case setRequirement.MatchString(term):
		m := setRequirement.FindStringSubmatch(term)
		r = requirement{key: m[1], op: m[2]}
		for _, v := range strings.Split(m[3], ",") {
			r.values = append(r.values, strings.TrimSpace(v))
		}
	case strings.HasPrefix(term, "!"):
		r = requirement{key: strings.TrimSpace(term[1:]), op: "!exists"}
	case strings.Contains(term, "!="):
		k, v, _ := strings.Cut(term, "!=")
		r = requirement{key: strings.TrimSpace(k), op: "!=", values: []string{strings.TrimSpace(v)}}
	case strings.Contains(term, "="):
		k, v, _ := strings.Cut(term, "=")
		v = strings.TrimPrefix(v, "=") // "==" is "="
		r = requirement{key: strings.TrimSpace(k), op: "=", values: []string{strings.TrimSpace(v)}}
	default:
		r = requirement{key: term, op: "exists"}
	}
	if !labelKey.MatchString(r.key) {
		return r, fmt.Errorf("%q: want key=value, key!=value, key in (a,b), key notin (a,b), key or !key", term)
	}
	for _, v := range r.values {
		if strings.ContainsAny(v, "=!() ") {
			return r, fmt.Errorf("%q: invalid value %q", term, v)
		}
	}
	return r, nil
}

// matches reports whether labels meet every requirement. As in
// Kubernetes, != and notin also match objects without the key.
func (s selector) matches(labels map[string]string) bool {
	for _, r := range s {
		v, has := labels[r.key]
		var ok bool
		switch r.op {
		case "=":
			ok = has && v == r.values[0]
		case "!=":
			ok = !has || v != r.values[0]
		case "in":
			ok = has && slices.Contains(r.values, v)
		case "notin":
			ok = !has || !slices.Contains(r.values, v)
		case "exists":
			ok = has
		case "!exists":
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// filterSeq passes on the items of a listing whose labels match sel.
func filterSeq[T interface{ GetLabels() map[string]string }](all iter.Seq2[T, error], sel selector) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for item, err := range all {
			if err == nil && !sel.matches(item.GetLabels()) {
				continue
			}
			if !yield(item, err) {
				return
			}
		}
	}
}
