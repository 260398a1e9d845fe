// Package bench is berth bench: it drives a Berth server (one it starts
// with embedded etcd, several replicas sharing one, or a running one) the
// way an orchestrator would, and measures how fast submitted pods are
// bound.
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
package bench
