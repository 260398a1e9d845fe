package bench

import (
	"fmt"
	"os"

	"github.com/berth-io/berth/internal/cgroup"
)

// The memory budget (--memory-budget): a cgroup that holds each start of
// the child, as a container's limit would.

// makeGroup makes the memory cgroup that --memory-budget puts the child
// in, named after this process so that runs side by side do not collide.
func (l *loader) makeGroup() error {
	g, err := cgroup.Host.NewMemoryGroup(fmt.Sprintf("berth-load-%d", os.Getpid()), l.lc.MemoryBudget)
	if err != nil {
		return fmt.Errorf("--memory-budget: %w", err)
	}
	l.group = g
	fmt.Fprintf(l.out, "server in memory cgroup %s, limited to %d bytes\n", g.Dir(), l.lc.MemoryBudget)
	if runsThisBinary(l.lc.Server.Path) {
		fmt.Fprintln(l.out, "note: the server runs this same binary: the pages of it that this process has read are charged to this "+
			"process's cgroup, not the budget, yet count in the server's RSS")
	}
	return nil
}

// runsThisBinary reports whether path is the executable of this process.
func runsThisBinary(path string) bool {
	self, err := os.Executable()
	if err != nil {
		return false
	}
	a, err1 := os.Stat(self)
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// removeGroup deletes the group once its last child is gone; a group
// left behind is named, for the operator to remove.
func (l *loader) removeGroup() {
	if err := l.group.Remove(); err != nil {
		fmt.Fprintf(l.out, "note: memory cgroup %s not removed: %v\n", l.group.Dir(), err)
	}
}

// oomNote says, once the child has died, whether the kernel killed it for
// going over --memory-budget.
func (l *loader) oomNote() string {
	if l.group == nil {
		return ""
	}
	if n, err := l.group.OOMKills(); err == nil && n > 0 {
		return fmt.Sprintf(" (killed by the kernel, out of memory: over --memory-budget %d bytes)", l.lc.MemoryBudget)
	}
	return ""
}
