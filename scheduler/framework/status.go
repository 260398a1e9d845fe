package framework

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Code is the outcome of running a plugin. The comment on each code says
// what the scheduling queue does with a pod that ends its attempt with it.
type Code int

// Status codes, in Kubernetes' order.
const (
	// Success: the plugin ran and the pod may proceed. A nil *Status is
	// also a success.
	Success Code = iota
	// Error: an internal failure (bad input, lost state). The pod is not
	// marked unschedulable by any plugin, so it goes to backoff and is
	// retried soon regardless of cluster events.
	Error
	// Unschedulable: the plugin found the pod does not fit. PostFilter
	// (preemption) may still make room. The pod waits in the unschedulable
	// pool until an event the rejecting plugin registered for, then goes
	// through backoff.
	Unschedulable
	// UnschedulableAndUnresolvable: the pod does not fit and preemption on
	// this node cannot help. Queued like Unschedulable.
	UnschedulableAndUnresolvable
	// Wait: a Permit plugin holds the pod until it is allowed, rejected or
	// times out.
	Wait
	// Skip: the plugin has nothing to do for this pod; from PreFilter or
	// PreScore it also skips the coupled Filter or Score, from Bind it
	// passes binding to the next Bind plugin.
	Skip
	// Pending: the attempt stops although nothing is wrong with the pod;
	// it waits for an external step. Requeued by events like Unschedulable,
	// but straight to the active queue, without backoff.
	Pending
)

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip", "Pending"}

func (c Code) String() string {
	if c < 0 || int(c) >= len(codeNames) {
		return "Code(" + strconv.Itoa(int(c)) + ")"
	}
	return codeNames[c]
}

// Status is the result of running a plugin: a code, human-readable
// reasons, an optional error and the plugin that produced it. A nil
// *Status means Success.
type Status struct {
	code    Code
	reasons []string
	err     error
	// plugin is set by the framework for rejections and errors so the queue
	// knows which plugin's events can requeue the pod.
	plugin string
}

// NewStatus returns a status with the given code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// skipped is the one Skip status SkipStatus hands out.
var skipped = &Status{code: Skip}

// SkipStatus returns a Skip status with no reasons. It is shared, so it
// must not be changed (WithPlugin, SetPlugin, AppendReason, WithError):
// PreFilter and PreScore plugins skip most pods, and a new status for
// each was a third of a scheduling cycle's small allocations. The
// framework records only the skip itself.
func SkipStatus() *Status { return skipped }

// NewRejection returns the status a Filter plugin returns for every node
// it rejects for one fixed reason, built once by the plugin and shared: a
// cycle asks a plugin about thousands of nodes, and a status per rejection
// was an allocation per node. It carries plugin so the framework never
// sets it, and like SkipStatus's it must not be changed.
func NewRejection(code Code, plugin, reason string) *Status {
	return &Status{code: code, reasons: []string{reason}, plugin: plugin}
}

// AsStatus wraps an error in an Error status; nil stays nil.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, err: err}
}

// WithError attaches an error and returns s.
func (s *Status) WithError(err error) *Status {
	s.err = err
	return s
}

// Code returns the code; Success for nil.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons(), ", ")
}

// Reasons returns the reasons, preceded by the error's text if any.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	if s.err != nil {
		return append([]string{s.err.Error()}, s.reasons...)
	}
	return s.reasons
}

// AppendReason adds a reason.
func (s *Status) AppendReason(reason string) { s.reasons = append(s.reasons, reason) }

// SetPlugin records the plugin that produced s.
func (s *Status) SetPlugin(plugin string) { s.plugin = plugin }

// WithPlugin records the plugin that produced s and returns s.
func (s *Status) WithPlugin(plugin string) *Status {
	s.plugin = plugin
	return s
}

// Plugin returns the plugin that produced s, or "".
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsWait reports whether s is Wait.
func (s *Status) IsWait() bool { return s.Code() == Wait }

// IsSkip reports whether s is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsError reports whether s is Error.
func (s *Status) IsError() bool { return s.Code() == Error }

// IsRejected reports whether the pod was turned away: Unschedulable,
// UnschedulableAndUnresolvable or Pending.
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable || c == Pending
}

// AsError returns nil for Success, Wait and Skip; otherwise the attached
// error, or an error carrying the message.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsWait() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// Equal compares code, reasons, error text and plugin; for cmp.Diff.
func (s *Status) Equal(o *Status) bool {
	if s == nil || o == nil {
		return s.IsSuccess() && o.IsSuccess()
	}
	if s.code != o.code || s.plugin != o.plugin || !slices.Equal(s.reasons, o.reasons) {
		return false
	}
	if (s.err == nil) != (o.err == nil) {
		return false
	}
	return s.err == nil || s.err.Error() == o.err.Error() || errors.Is(s.err, o.err)
}

// String returns the message.
func (s *Status) String() string { return s.Message() }

// Clone returns a copy that shares the error.
func (s *Status) Clone() *Status {
	if s == nil {
		return nil
	}
	c := *s
	c.reasons = slices.Clone(s.reasons)
	return &c
}
