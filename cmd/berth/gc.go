package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-io/berth/internal/cgroup"
	"github.com/berth-io/berth/internal/hugeheap"
)

// defaultGCPercent is the ceiling of the adaptive target (gc_tuner.go),
// which only a small heap reaches: past 85 MiB live, 300% would be more
// growth than --gc-headroom, and the headroom sets the target instead. So
// a heap grows between collections by at most 256 MiB (or half of what is
// live, for a large one) whatever the ceiling. Fixed, without the tuner,
// 300 put a replica at 20,000 nodes and 200,000 pods at several GB
// (issue 11), and Go's 100 replaced it; with the tuner, 300 only spares a
// small or growing heap collections. At 5,000 nodes and 200,000 pods it
// took 4-6% less server CPU per pod than 100, in three paired loads, at
// the same peak; at 20,000 nodes, where the headroom governs, nothing
// changed. GOGC, or --gc-headroom 0, makes the target fixed, as set.
const defaultGCPercent = 300

const gcPercentUsage = "garbage collection target percentage (Go's GOGC): the heap may grow to (1 + this/100) times what is live. " +
	"Higher trades memory for less collector CPU. The GOGC environment variable, if set, wins"

const memoryLimitUsage = "soft memory limit of the Go heap (Go's GOMEMLIMIT), in bytes or as a quantity such as 2Gi, 512Mi, 2GiB; " +
	"the collector runs harder as the heap nears it, whatever --gc-percent says. The GOMEMLIMIT environment variable, if set, wins. " +
	"Empty: 90% of the cgroup's memory limit, if the process has one"

// cgroupLimitShare of a container's memory limit goes to the soft limit:
// the rest is for what the Go runtime does not count (stacks of cgo, page
// cache charged to the cgroup, fragmentation) so the kernel's OOM killer
// does not strike before the collector has tried.
const cgroupLimitShare = 0.9

// cgroupPaths is where the memory limit is read; tests point it at fake
// files.
var cgroupPaths = cgroup.Host

// thpModePath is where Linux says whether anonymous memory gets
// transparent huge pages; tests point it at a fake file.
var thpModePath = hugeheap.ModePath

// gcSettings is what the collector was set to, and why, for the start log.
type gcSettings struct {
	gcPercent         int
	gcPercentSource   string // "flag" or "GOGC"
	memoryLimit       int64  // math.MaxInt64: none
	memoryLimitSource string // "flag", "GOMEMLIMIT", "cgroup" or "none"
	// headroom is the adaptive target's growth allowance (see gcTuner);
	// 0: gcPercent is fixed.
	headroom int64
	tuner    *gcTuner
	// startupPercent is the least target held until the replica first
	// serves (see holdForStartup); 0: none.
	startupPercent int
	// hugePages is the kernel's transparent huge page mode. Go asks for
	// none, so its heap has them under "always", or under "madvise" when
	// hugePagesAdvised (see hugeheap): this machine started a replica
	// of 200,000 pods with a quarter less CPU with them (fewer page
	// faults), worth knowing when comparing figures.
	hugePages        string
	hugePagesAdvised bool
}

// applyGC sets the collector's target and soft memory limit. The
// environment wins over flags, as Go's own variables do; without either
// limit, one is taken from the cgroup so a container's heap is collected
// before the kernel kills it.
func applyGC(percent int, memoryLimit string) (gcSettings, error) {
	s := gcSettings{gcPercent: percent, gcPercentSource: "flag", memoryLimit: math.MaxInt64, memoryLimitSource: "none",
		hugePages: hugeheap.Mode(thpModePath)}
	if _, set := os.LookupEnv("GOGC"); set {
		s.gcPercentSource = "GOGC"
		s.gcPercent = debug.SetGCPercent(-1)
		debug.SetGCPercent(s.gcPercent)
	} else {
		debug.SetGCPercent(percent)
	}
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		s.memoryLimitSource = "GOMEMLIMIT"
		s.memoryLimit = debug.SetMemoryLimit(-1) // -1 reads it
		return s, nil
	case memoryLimit != "":
		limit, err := parseMemoryLimit(memoryLimit)
		if err != nil {
			return s, err
		}
		s.memoryLimit, s.memoryLimitSource = limit, "flag"
	default:
		limit, ok, err := cgroupPaths.MemoryLimit()
		if err != nil || !ok {
			// An unreadable cgroup leaves Go's default: no limit.
			return s, nil
		}
		s.memoryLimit, s.memoryLimitSource = int64(float64(limit)*cgroupLimitShare), "cgroup"
	}
	debug.SetMemoryLimit(s.memoryLimit)
	return s, nil
}

// adapt starts the tuner that lowers GOGC for a large heap (see gcTuner),
// unless headroom is 0 or GOGC came from the environment: an operator who
// set Go's own variable gets exactly what Go would do.
func (s *gcSettings) adapt(headroom string) error {
	n, err := parseHeadroom(headroom)
	if err != nil {
		return err
	}
	if n == 0 || s.gcPercentSource != "flag" || s.gcPercent <= 0 {
		return nil
	}
	s.headroom = n
	s.tuner = startGCTuner(s.gcPercent, n)
	return nil
}

// holdForStartup raises the adaptive target for a replica's start-up load
// (see startupPercent) and returns what ends it; nil when the target is
// fixed, by GOGC or --gc-headroom 0, which an operator chose as it is.
func (s *gcSettings) holdForStartup() func() {
	if s.tuner == nil {
		return nil
	}
	s.tuner.startup()
	s.startupPercent = startupPercent
	return s.tuner.started
}

// parseHeadroom reads --gc-headroom: "0" or a memory quantity.
func parseHeadroom(v string) (int64, error) {
	if strings.TrimSpace(v) == "0" {
		return 0, nil
	}
	return parseBytes("--gc-headroom", v)
}

// String is the settings on one line, for berth bench's output.
func (s gcSettings) String() string {
	return fmt.Sprintf("gc: GOGC %d (%s)%s, memory limit %s (%s), transparent huge pages %s", s.gcPercent, s.gcPercentSource, s.adaptiveString(), s.limitString(), s.memoryLimitSource, s.hugePagesString())
}

func (s gcSettings) hugePagesString() string {
	if s.hugePagesAdvised {
		return s.hugePages + " (heap advised)"
	}
	return s.hugePages
}

func (s gcSettings) adaptiveString() string {
	if s.headroom == 0 {
		return ""
	}
	return fmt.Sprintf(" down to %d%% past %s of headroom", minAdaptivePercent, resource.NewQuantity(s.headroom, resource.BinarySI))
}

func (s gcSettings) limitString() string {
	if s.memoryLimit == math.MaxInt64 {
		return "none"
	}
	return resource.NewQuantity(s.memoryLimit, resource.BinarySI).String()
}

// log reports the collector's settings at start, so an operator sees which
// of flag, environment and cgroup took effect.
func (s gcSettings) log(logger *zap.Logger) {
	logger.Info("garbage collector",
		zap.Int("gc_percent", s.gcPercent), zap.String("gc_percent_source", s.gcPercentSource),
		zap.Int64("gc_headroom_bytes", s.headroom), zap.Int("startup_gc_percent", s.startupPercent),
		zap.String("memory_limit", s.limitString()), zap.Int64("memory_limit_bytes", s.memoryLimit),
		zap.String("memory_limit_source", s.memoryLimitSource),
		zap.String("transparent_huge_pages", s.hugePages), zap.Bool("heap_huge_pages_advised", s.hugePagesAdvised))
}

// parseMemoryLimit reads bytes or a Kubernetes quantity; "GiB"-style
// suffixes are accepted too, since GOMEMLIMIT spells them so.
func parseMemoryLimit(v string) (int64, error) { return parseBytes("--memory-limit", v) }

// parseBytes reads a positive size given to flag.
func parseBytes(flag, v string) (int64, error) {
	s := strings.TrimSpace(v)
	if strings.HasSuffix(s, "iB") {
		s = strings.TrimSuffix(s, "B")
	} else if strings.HasSuffix(s, "B") && len(s) > 1 && strings.ContainsRune("0123456789kMGTPE", rune(s[len(s)-2])) {
		s = strings.TrimSuffix(s, "B") // plain bytes ("1024B") or decimal units ("644MB")
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", flag, v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive whole number of bytes", flag, v)
	}
	return n, nil
}
