package deploy

import (
	"fmt"
	"sort"
	"strings"
)

// This file is a small PromQL reader: enough to pull the series names out
// of the dashboard's and the alert rules' expressions so the test can look
// for each in a real replica's /metrics. It is no parser: it walks the
// tokens, skips what cannot name a series (strings, label matchers, range
// and subquery brackets, grouping label lists) and knows the words that
// are PromQL's own.

// promqlAggregations are the aggregation operators; they may be followed by
// a grouping clause before their parentheses, so they cannot be told from
// a series by what follows.
var promqlAggregations = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
	"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio")

// promqlKeywords are binary operators, modifiers and literals.
var promqlKeywords = set("and", "or", "unless", "bool", "offset", "atan2", "inf", "nan")

// promqlGrouping words take a parenthesised list of label names.
var promqlGrouping = set("by", "without", "on", "ignoring", "group_left", "group_right")

// promqlFunctions are the functions a rule here may call; one not listed is
// reported, so a typo fails without promtool too.
var promqlFunctions = set("abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max",
	"clamp_min", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
	"floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
	"histogram_stddev", "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
	"irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear",
	"rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp", "vector",
	"year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
	"quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time")

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// seriesNames returns the sorted, distinct series names expr reads, as
// written (a histogram's _bucket, _sum or _count included). It fails on
// unbalanced brackets, unterminated strings and unknown functions.
func seriesNames(expr string) ([]string, error) {
	r := &promqlReader{s: expr}
	names := map[string]bool{}
	depth := 0
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			r.i++
		case c == '#':
			for r.i < len(r.s) && r.s[r.i] != '\n' {
				r.i++
			}
		case c == '"' || c == '\'' || c == '`':
			if err := r.skipString(); err != nil {
				return nil, err
			}
		case c == '{':
			if err := r.skipGroup('{', '}'); err != nil {
				return nil, err
			}
		case c == '[':
			if err := r.skipGroup('[', ']'); err != nil {
				return nil, err
			}
		case c == '$':
			// A Grafana variable outside brackets, e.g. a threshold.
			r.i++
			r.ident()
		case c == '(':
			depth++
			r.i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced ')' at %d in %q", r.i, expr)
			}
			r.i++
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at %d in %q", c, r.i, expr)
		case isDigit(c) || c == '.':
			r.number()
		case isIdentStart(c):
			word := r.ident()
			next := r.peek()
			switch {
			case promqlGrouping[word]:
				if next == '(' {
					if err := r.skipGroup('(', ')'); err != nil {
						return nil, err
					}
				}
			case promqlAggregations[word] || promqlKeywords[word]:
			case next == '(':
				if !promqlFunctions[word] {
					return nil, fmt.Errorf("unknown function %s in %q", word, expr)
				}
			default:
				names[word] = true
			}
		default:
			r.i++ // operators, commas
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed '(' in %q", expr)
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

type promqlReader struct {
	s string
	i int
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

func (r *promqlReader) ident() string {
	start := r.i
	for r.i < len(r.s) && isIdent(r.s[r.i]) {
		r.i++
	}
	return r.s[start:r.i]
}

// number skips a number or a duration (0.99, 1e-3, 5m, 0x1f).
func (r *promqlReader) number() {
	for r.i < len(r.s) {
		c := r.s[r.i]
		if isIdent(c) || c == '.' {
			r.i++
			continue
		}
		if (c == '+' || c == '-') && r.i > 0 && (r.s[r.i-1]|0x20) == 'e' {
			r.i++
			continue
		}
		return
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (r *promqlReader) peek() byte {
	for j := r.i; j < len(r.s); j++ {
		if !strings.ContainsRune(" \t\r\n", rune(r.s[j])) {
			return r.s[j]
		}
	}
	return 0
}

func (r *promqlReader) skipString() error {
	quote := r.s[r.i]
	for j := r.i + 1; j < len(r.s); j++ {
		switch {
		case r.s[j] == '\\' && quote != '`':
			j++
		case r.s[j] == quote:
			r.i = j + 1
			return nil
		}
	}
	return fmt.Errorf("unterminated string at %d in %q", r.i, r.s)
}

// skipGroup skips from the open bracket at r.i (after spaces) past its
// close, strings inside included.
func (r *promqlReader) skipGroup(open, close byte) error {
	for r.i < len(r.s) && r.s[r.i] != open {
		r.i++
	}
	start := r.i
	r.i++
	for r.i < len(r.s) {
		switch c := r.s[r.i]; {
		case c == close:
			r.i++
			return nil
		case c == '"' || c == '\'' || c == '`':
			if err := r.skipString(); err != nil {
				return err
			}
		case c == '{' || c == '[' || c == '(':
			return fmt.Errorf("%q inside %q...%q at %d in %q", c, open, close, start, r.s)
		default:
			r.i++
		}
	}
	return fmt.Errorf("unclosed %q at %d in %q", open, start, r.s)
}
