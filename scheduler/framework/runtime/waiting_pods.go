package runtime

import (
	"fmt"
	"sync"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// maxPermitTimeout caps what a Permit plugin may ask to wait (kube's 15m).
const maxPermitTimeout = 15 * time.Minute

// waitingPods tracks pods held at Permit, by framework.WaitingPodKey.
type waitingPods struct {
	mu   sync.RWMutex
	pods map[string]*waitingPod
}

func newWaitingPods() *waitingPods { return &waitingPods{pods: map[string]*waitingPod{}} }

func (m *waitingPods) add(wp *waitingPod) {
	m.mu.Lock()
	m.pods[framework.WaitingPodKey(wp.pod)] = wp
	m.mu.Unlock()
}

func (m *waitingPods) remove(key string) {
	m.mu.Lock()
	delete(m.pods, key)
	m.mu.Unlock()
}

func (m *waitingPods) get(key string) *waitingPod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods[key]
}

func (m *waitingPods) iterate(fn func(framework.WaitingPod)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, wp := range m.pods {
		fn(wp)
	}
}

// waitingPod is a pod waiting for every Permit plugin that said Wait to
// allow it. The first decision wins: the last Allow, a Reject, or a
// plugin's timeout (which rejects).
type waitingPod struct {
	pod *framework.Pod
	// s carries the decision. It has room for one value and is written
	// without blocking, so Allow and Reject never block and a decision made
	// before anyone waits is kept.
	s chan *framework.Status

	mu      sync.Mutex
	pending map[string]framework.Timer // plugin -> its timeout
}

var _ framework.WaitingPod = (*waitingPod)(nil)

func newWaitingPod(pod *framework.Pod, waits map[string]time.Duration, clock framework.Clock) *waitingPod {
	wp := &waitingPod{pod: pod, s: make(chan *framework.Status, 1), pending: make(map[string]framework.Timer, len(waits))}
	// Hold the lock so a timeout cannot fire before every timer is
	// recorded (Reject stops them all).
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for plugin, d := range waits {
		msg := fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", d, plugin)
		wp.pending[plugin] = clock.AfterFunc(d, func() { wp.Reject(plugin, msg) })
	}
	return wp
}

func (w *waitingPod) GetPod() *framework.Pod { return w.pod }

func (w *waitingPod) GetPendingPlugins() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending))
	for p := range w.pending {
		out = append(out, p)
	}
	return out
}

func (w *waitingPod) Allow(pluginName string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.pending[pluginName]; ok {
		t.Stop()
		delete(w.pending, pluginName)
	}
	if len(w.pending) != 0 {
		return
	}
	select {
	case w.s <- nil:
	default:
	}
}

// Reject decides the wait, unless it was decided already. Either way no
// plugin is pending any more: a rejected pod stays listed until its cycle
// wakes, and a plugin that counts the pods waiting on it (Coscheduling)
// must not count one that will never come.
func (w *waitingPod) Reject(pluginName, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.pending {
		t.Stop()
	}
	clear(w.pending)
	select {
	case w.s <- framework.NewStatus(framework.Unschedulable, msg).WithPlugin(pluginName):
		return true
	default:
		return false
	}
}
