package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// runtimeMetrics are the runtime's figures, beyond the default memstats,
// that say where a replica's memory and CPU go (issue 11): the heap live
// after the last collection against the collector's goal and GOGC (which
// berth serve adapts to the live heap), and the CPU the collector took, to
// weigh one against the other; and how long goroutines waited for a core
// and for mutexes, which is where a latency tail on a busy replica goes.
var runtimeMetrics = regexp.MustCompile(`^/gc/heap/(live|goal):bytes$|^/gc/gogc:percent$|^/gc/gomemlimit:bytes$|` +
	`^/cpu/classes/(gc/total|total):cpu-seconds$|^/sched/latencies:seconds$|^/sync/mutex/wait/total:seconds$`)

// newRegistry is the replica's metrics registry, with the Go runtime's and
// the process's collectors, and the process's memory by kind
// (process_memory.go).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: runtimeMetrics})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newProcessMemoryCollector())
	return reg
}

// metricsListener is the operator-only HTTP listener: /metrics, and pprof
// when enabled.
type metricsListener struct {
	lis  net.Listener
	http *http.Server
}

// listenMetrics opens the listener at addr serving what g gathers; reg
// takes the handler's own metrics. "-" disables it (nil, nil). With tlsCfg
// it serves HTTPS.
func listenMetrics(addr string, g prometheus.Gatherer, reg *prometheus.Registry, withPprof bool, tlsCfg *tls.Config) (*metricsListener, error) {
	if addr == "-" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: reg}))
	if withPprof {
		// Profiles are the first thing to ask for when a replica is slow,
		// but they expose memory contents and cost CPU: opt-in (issue 10).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if tlsCfg != nil {
		lis = tls.NewListener(lis, tlsCfg)
	}
	return &metricsListener{lis: lis, http: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// serve runs until shutdown, which is its normal end.
func (m *metricsListener) serve() error {
	if err := m.http.Serve(m.lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (m *metricsListener) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	_ = m.http.Shutdown(ctx)
	cancel()
}

// etcdServerMetrics are the embedded etcd server's metrics, which etcd
// registers in the default registry when its package loads. Only its
// etcd_ families: the default registry's Go and process collectors would
// repeat the replica's own, and its gRPC metrics are etcd's server, named
// like the replica's.
func etcdServerMetrics() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := prometheus.DefaultGatherer.Gather()
		kept := mfs[:0]
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "etcd_") {
				kept = append(kept, mf)
			}
		}
		return kept, err
	})
}

// advertiseAddr is addr as others can dial it: a wildcard host (0.0.0.0,
// ::) becomes this host's name.
func advertiseAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return addr.String()
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return addr.String()
	}
	return net.JoinHostPort(name, port)
}

type addrString string

func (a addrString) String() string { return string(a) }

// addr is the listener's address for logs; nil-safe.
func (m *metricsListener) addr() fmt.Stringer {
	if m == nil {
		return addrString("disabled")
	}
	return m.lis.Addr()
}

// defaultReplicaID is stable across restarts of one replica on one host,
// so a restart takes its shards back at once. An embedded etcd serves one
// replica only, whatever port it listens on.
func defaultReplicaID(addr net.Addr, embedded bool) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "berth"
	}
	host = strings.ReplaceAll(host, "/", "-")
	if embedded {
		return host + "-embedded"
	}
	port := "0"
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	return host + "-" + port
}
