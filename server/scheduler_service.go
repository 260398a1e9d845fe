package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/store"
)

// schedulerStore is what the scheduler service reads and writes.
type schedulerStore interface {
	CreatePods(ctx context.Context, pods []*berthv1.Pod) []store.CreateResult
	GetPod(ctx context.Context, namespace, name string) (*berthv1.Pod, int64, error)
	WaitPod(ctx context.Context, namespace, name string, fromRevision int64, done func(*berthv1.Pod) bool) (*berthv1.Pod, int64, error)
	WatchBindings(ctx context.Context, fromRevision int64, send func(*berthv1.BindingEvent) error, opts ...store.WatchOption) error
	ListReplicas(ctx context.Context) ([]*berthv1.Replica, error)
}

// schedulerService is the scheduler's own face: the bindings stream,
// Schedule (submit and wait), Explain (dry run) and the replicas' shards.
type schedulerService struct {
	berthv1.UnimplementedSchedulerServiceServer
	store schedulerStore
	sched Scheduler
	// streams ends when the front shuts down.
	streams  context.Context
	watchers prometheus.Gauge
}

func (ss *schedulerService) WatchBindings(req *berthv1.WatchBindingsRequest, stream berthv1.SchedulerService_WatchBindingsServer) error {
	// Streams end with the server's shutdown as well as the client's cancel,
	// so a graceful stop does not wait on subscribers that never leave.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(ss.streams, cancel)
	defer stop()
	ss.watchers.Inc()
	defer ss.watchers.Dec()

	sent := newSentRevisions(req.GetFromRevision())
	result := make(chan error, 1)
	go func() {
		result <- ss.store.WatchBindings(ctx, req.GetFromRevision(), func(ev *berthv1.BindingEvent) error {
			sent.starting(ev.GetRevision())
			if err := stream.Send(&berthv1.WatchBindingsResponse{Event: ev}); err != nil {
				return err
			}
			sent.done(ev.GetRevision())
			return nil
		}, store.OnSynced(func(rev int64) error {
			if err := stream.Send(&berthv1.WatchBindingsResponse{ProgressRevision: rev}); err != nil {
				return err
			}
			sent.synced(rev)
			return nil
		}))
	}()
	var err error
	select {
	case err = <-result:
	case <-ctx.Done():
		// A Send stuck on a client that stopped reading would hold this
		// handler, and with it a graceful stop, until the connection
		// closed. It holds the goroutine above instead: returning ends the
		// stream, which makes the stuck Send fail and that goroutine end.
		err = ctx.Err()
	}
	var behind *store.FellBehindError
	if errors.As(err, &behind) {
		err = &store.FellBehindError{Resume: sent.resume(behind.Resume), Why: behind.Why}
	}
	if ss.streams.Err() != nil && stream.Context().Err() == nil {
		return status.Error(codes.Unavailable, "server shutting down; resume from the last revision received")
	}
	if err != nil && stream.Context().Err() != nil {
		return status.FromContextError(stream.Context().Err()).Err()
	}
	return toStatus(err, "watch bindings")
}

// sentRevisions tracks what a watch stream has sent, so that a subscriber
// cut off for falling behind is told a revision it can resume from without
// a gap. One transaction's events share a revision, and a cut-off can fall
// between them: only a revision followed by a later one (or by a progress
// marker) is known to have been sent whole.
//
// A stuck Send runs on the store's goroutine while the handler reads
// resume, hence the lock.
type sentRevisions struct {
	mu       sync.Mutex
	last     int64 // revision of the last event sent
	complete int64 // every event up to here was sent
}

// newSentRevisions starts at from: a resume from R has all of R. From 0,
// the listing's events carry each pod's own revision, so nothing is known
// complete until its progress marker.
func newSentRevisions(from int64) *sentRevisions {
	return &sentRevisions{last: from, complete: from}
}

func (s *sentRevisions) starting(rev int64) {
	s.mu.Lock()
	if rev > s.last {
		s.complete = s.last
	}
	s.mu.Unlock()
}

func (s *sentRevisions) done(rev int64) {
	s.mu.Lock()
	s.last = max(s.last, rev)
	s.mu.Unlock()
}

func (s *sentRevisions) synced(rev int64) {
	s.mu.Lock()
	s.last, s.complete = rev, rev
	s.mu.Unlock()
}

// resume is the revision to resume from, never past the store's own.
func (s *sentRevisions) resume(storeResume int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(s.complete, storeResume)
}

// Schedule is SubmitPod followed by a wait on the pod's own key, so the
// answer comes from the same durable record every replica sees.
func (ss *schedulerService) Schedule(ctx context.Context, req *berthv1.ScheduleRequest) (*berthv1.ScheduleResponse, error) {
	what := "pod " + req.GetPod().GetNamespace() + "/" + req.GetPod().GetName()
	res := ss.store.CreatePods(ctx, []*berthv1.Pod{store.Admit(req.GetPod(), time.Now())})[0]
	if res.Err != nil {
		return nil, toStatus(res.Err, what)
	}
	if store.Decided(res.Pod.GetStatus().GetPhase()) {
		return &berthv1.ScheduleResponse{Pod: res.Pod, Revision: res.Revision}, nil
	}
	uid := res.Pod.GetUid()
	p, rev, err := ss.store.WaitPod(ctx, res.Pod.GetNamespace(), res.Pod.GetName(), res.Revision+1, func(p *berthv1.Pod) bool {
		return p.GetUid() == uid && store.Decided(p.GetStatus().GetPhase())
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(), "%s: no decision before the deadline; it stays queued", what)
		}
		return nil, toStatus(err, what)
	}
	return &berthv1.ScheduleResponse{Pod: p, Revision: rev}, nil
}

// Explain dry-runs a pod, inline or stored, in the shard that owns it.
func (ss *schedulerService) Explain(ctx context.Context, req *berthv1.ExplainRequest) (*berthv1.ExplainResponse, error) {
	var wire *berthv1.Pod
	var rev int64
	if ref := req.GetExisting(); ref != nil {
		p, r, err := ss.store.GetPod(ctx, ref.GetNamespace(), ref.GetName())
		if err != nil {
			return nil, toStatus(err, "pod "+ref.GetNamespace()+"/"+ref.GetName())
		}
		if p.GetNodeName() != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s is already bound to %s; explain a pending pod or give the pod inline", ref.GetNamespace(), ref.GetName(), p.GetNodeName())
		}
		wire, rev = p, r
	} else {
		wire = store.Admit(req.GetPod(), time.Now())
		wire.NodeName = ""
	}
	ex, err := ss.sched.Explain(ctx, convert.PodToCore(wire, rev))
	if errors.Is(err, scheduler.ErrUnknownProfile) {
		var v violations
		v.add("pod.scheduler_name", "no scheduling profile named %q", wire.GetSchedulerName())
		return nil, v.err()
	}
	if err != nil {
		return nil, toStatus(err, "explain")
	}
	return convert.ExplanationToWire(ex), nil
}

// ListReplicas reads the membership from etcd, so every replica gives the
// same answer.
func (ss *schedulerService) ListReplicas(ctx context.Context, _ *berthv1.ListReplicasRequest) (*berthv1.ListReplicasResponse, error) {
	replicas, err := ss.store.ListReplicas(ctx)
	if err != nil {
		return nil, toStatus(err, "replicas")
	}
	return &berthv1.ListReplicasResponse{Replicas: replicas, ShardCount: int32(ss.sched.LogicalShards())}, nil
}
