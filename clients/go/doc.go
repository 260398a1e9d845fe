// Package berth is the Go client of the Berth scheduling service.
//
// A Client wraps one gRPC connection and offers a typed method with a plain
// Go signature for every RPC, iterators that page through lists,
// WatchBindings, a watch that survives server restarts without losing or
// repeating events, and SubmitAndWait, which submits a pod and waits for its
// binding without the race of a watch opened after the submit. The
// generated clients remain reachable through ClusterService, PodService and
// SchedulerService.
//
// Unary calls that fail with Unavailable or ResourceExhausted are retried
// with exponential backoff and jitter (5 attempts by default), waiting at
// least the delay a shedding server names in its RetryInfo, and never past
// the caller's deadline: when time runs out the server's own last answer is
// returned (its status code and message), not a bare DeadlineExceeded. Every
// Berth write is idempotent, so a retry after a lost response cannot apply a
// change twice: see the method comments for what a retried call can report.
package berth
