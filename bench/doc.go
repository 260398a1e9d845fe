// Package bench is berth bench and berth load: it drives a Berth server
// (one it starts with embedded etcd, several replicas sharing one, a
// berth serve child process, or a running one) the way an orchestrator
// would, and measures how fast submitted pods are bound; berth load also
// measures the server's memory and its restarts.
//
// A run registers a workload's nodes, binds its init pods unmeasured, then
// submits the measured pods and times each from its SubmitPods call to its
// BOUND event on WatchBindings. Where to look:
//
//	bench.go     Config and Run: one workload after another, and the report
//	workload.go  the workloads, modelled on Kubernetes' scheduler_perf, and
//	             the checks of their hard constraints on the final placements
//	runner.go    one workload against one server: nodes, phases, cleanup
//	tracker.go   what the bench knows of each pod, fed by the watch; the
//	             evictor that plays the orchestrator's part in preemption
//	replay.go    the Alibaba trace replay (the trace itself: package trace)
//	fleet.go     --replicas: replicas in one process and their conflict report
//	load.go      berth load: the scale run, its restarts (load_report.go:
//	             its output and JSON)
//	server.go    the berth serve child process: its group, its end on
//	             every path, its memory from /proc
package bench
