package queue

import (
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// Defaults, the same as kube-scheduler's.
const (
	DefaultPodInitialBackoff          = 1 * time.Second
	DefaultPodMaxBackoff              = 10 * time.Second
	DefaultUnschedulableFlushInterval = 5 * time.Minute

	// backoffFlushPeriod is how often Run moves pods whose backoff ended.
	backoffFlushPeriod = 1 * time.Second
	// unschedulableFlushPeriod is how often Run looks for pods parked too
	// long (or the flush interval, if shorter).
	unschedulableFlushPeriod = 30 * time.Second
)

// PreEnqueueFunc decides whether a pod may enter the active queue: a nil or
// Success status lets it in; any other status gates it, and its Plugin()
// names the gating plugin (runtime.Framework.PreEnqueueCheck fits).
type PreEnqueueFunc func(p *framework.Pod) *framework.Status

type options struct {
	clock                      Clock
	podInitialBackoff          time.Duration
	podMaxBackoff              time.Duration
	unschedulableFlushInterval time.Duration
	hints                      map[string][]framework.ClusterEventWithHint
	preEnqueue                 PreEnqueueFunc
}

func defaultOptions() options {
	return options{
		clock:                      RealClock{},
		podInitialBackoff:          DefaultPodInitialBackoff,
		podMaxBackoff:              DefaultPodMaxBackoff,
		unschedulableFlushInterval: DefaultUnschedulableFlushInterval,
	}
}

// Option configures a PriorityQueue.
type Option func(*options)

// WithClock sets the time source (default: the wall clock).
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithPodInitialBackoff sets the backoff after a pod's first failed attempt;
// it doubles with each further attempt.
func WithPodInitialBackoff(d time.Duration) Option {
	return func(o *options) { o.podInitialBackoff = d }
}

// WithPodMaxBackoff caps the backoff.
func WithPodMaxBackoff(d time.Duration) Option { return func(o *options) { o.podMaxBackoff = d } }

// WithUnschedulableFlushInterval sets how long a pod may stay unschedulable
// without a relevant event before it is retried anyway (kube-scheduler's
// podMaxInUnschedulablePodsDuration).
func WithUnschedulableFlushInterval(d time.Duration) Option {
	return func(o *options) { o.unschedulableFlushInterval = d }
}

// WithQueueingHints registers, per plugin name, the cluster events that may
// make a pod that plugin rejected schedulable.
func WithQueueingHints(hints map[string][]framework.ClusterEventWithHint) Option {
	return func(o *options) { o.hints = hints }
}

// WithPreEnqueue sets the gate every pod passes before entering the active
// queue. It runs under the queue's lock and must not call the queue.
func WithPreEnqueue(f PreEnqueueFunc) Option { return func(o *options) { o.preEnqueue = f } }
