package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a configuration file, located by line and by
// field path (kube's spelling, e.g. profiles[0].plugins.score.enabled[1]).
type Error struct {
	// File is the name given to Load or WithFileName; may be empty.
	File string
	// Line is 1-based; 0 when the problem has no place in the file.
	Line int
	// Path is the field the problem is about; empty for the whole file.
	Path   string
	Reason string
}

// Error formats as file:line: path: reason, leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Errors is every problem found in one file, in file order. Parse and
// Load return it (as error) when the file is invalid.
type Errors []*Error

// Error lists the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual errors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// problems collects errors and the line of every field seen while
// decoding, so later checks can point at the right line.
type problems struct {
	file  string
	lines map[string]int
	errs  Errors
	// bad holds the paths already reported: a field that failed to decode
	// is left zero, and checks of it or its children would only echo that.
	bad map[string]bool
	// depth and budget bound decode's recursion and total work;
	// exhausted is set once either ran out.
	depth, budget int
	exhausted     bool
}

func newProblems(file string) *problems {
	return &problems{file: file, lines: map[string]int{"": 1}, bad: map[string]bool{}}
}

// addf records a problem at path, on the line of path or of its nearest
// ancestor that appears in the file, unless path or an ancestor already
// has one.
func (p *problems) addf(path, format string, args ...any) {
	for q := path; ; q = parent(q) {
		if p.bad[q] {
			return
		}
		if q == "" {
			break
		}
	}
	p.bad[path] = true
	p.errs = append(p.errs, &Error{File: p.file, Line: p.lineOf(path), Path: path, Reason: fmt.Sprintf(format, args...)})
}

// parent drops the last field or index of path.
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

// lineOf returns the line of path, or of its nearest recorded ancestor.
func (p *problems) lineOf(path string) int {
	for ; path != ""; path = parent(path) {
		if l, ok := p.lines[path]; ok {
			return l
		}
	}
	return p.lines[""]
}

// err returns the problems in file order, or nil.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return p.errs
}
