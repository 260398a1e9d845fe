package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// startupPhase is when one start-up phase of a restarted child ended,
// counted from its start.
type startupPhase struct {
	name string
	end  time.Duration
}

const phaseMetric = "berth_startup_phase_seconds"

// readStartupPhases reads the phases a child has ended from its metrics
// at addr, in the order they ended; nil when they cannot be read, which
// only leaves them out of the report.
func readStartupPhases(ctx context.Context, addr string) []startupPhase {
	if addr == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := scrapeCounters(ctx, addr)
	if err != nil {
		return nil
	}
	return startupPhasesOf(m)
}

// startupPhasesOf picks the phase gauge out of a scrape.
func startupPhasesOf(m map[string]float64) []startupPhase {
	var out []startupPhase
	for series, v := range m {
		name, ok := strings.CutPrefix(series, phaseMetric+`{phase="`)
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, `"}`); ok {
			out = append(out, startupPhase{name: name, end: time.Duration(v * float64(time.Second))})
		}
	}
	// Phases that end together keep a stable order.
	slices.SortFunc(out, func(a, b startupPhase) int {
		return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	})
	return out
}

// formatPhases is the phases as "etcd 4.06s, snapshot 5.83s, ...".
func formatPhases(phases []startupPhase) string {
	parts := make([]string, len(phases))
	for i, p := range phases {
		parts[i] = fmt.Sprintf("%s %s", p.name, p.end.Round(10*time.Millisecond))
	}
	return strings.Join(parts, ", ")
}

// childMetricsAddr is where the child serves its metrics: the run's own
// address unless --serve-args names another (the last one given wins, as
// for Go's flags), "" if they turn the listener off.
func childMetricsAddr(own string, serveArgs []string) string {
	addr := own
	for i, a := range serveArgs {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "metrics-listen" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasValue {
			if i+1 >= len(serveArgs) {
				continue
			}
			value = serveArgs[i+1]
		}
		addr = value
	}
	if addr == "-" {
		return ""
	}
	return addr
}
