// Package berthtest runs an in-memory Berth server on a loopback port for
// tests of code that talks to Berth: the client library, the CLI, and
// orchestrator integrations.
//
// It implements the API's contract closely enough for client logic
// (validation with BadRequest details, idempotent submits, paging, watch
// resume and compaction) and lets a test inject failures. It does no
// scheduling: a test binds pods itself with Bind.
package berthtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// ErrEndStream, returned by a WatchFault, ends the stream with status OK,
// which the client sees as io.EOF, the way a server shutting down does.
var ErrEndStream = errors.New("berthtest: end stream")

// UnaryFault decides the outcome of the call-th call (0-based) of method,
// e.g. "/berth.v1.ClusterService/UpsertNode", before it runs: a non-nil
// error is returned to the client instead.
type UnaryFault func(method string, call int) error

// ResponseFault is like UnaryFault but runs after the call has been
// applied, replacing its response: a lost response after a commit.
type ResponseFault func(method string, call int) error

// WatchFault is asked before the sent-th event (0-based) of the stream-th
// WatchBindings stream (0-based) is sent: a non-nil error ends the stream
// with it.
type WatchFault func(stream, sent int) error

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	// Addr is the host:port the server listens on.
	Addr string

	grpc *grpc.Server

	mu         sync.Mutex
	nodes      map[string]*berthv1.Node
	pods       map[string]*berthv1.Pod // by namespace/name
	podRevs    map[string]int64        // revision of each pod's submit
	reportRevs map[string]int64        // revision of each pod's last report (feedback.go)
	revision   int64
	nextUID    int
	events     []*berthv1.BindingEvent
	compacted  int64         // watches from below this revision fail
	changed    chan struct{} // closed and replaced when events grow
	maxPage    int
	calls      map[string]int
	watchFroms []int64
	unaryFault UnaryFault
	respFault  ResponseFault
	watchFault WatchFault

	served chan struct{} // closed when Serve has returned
}

// Start runs a fake server on 127.0.0.1:0 and stops it when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// New runs a fake server on 127.0.0.1:0 until Stop, for code that has no
// testing.TB to hand (examples, TestMain); tests call Start.
func New() (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("berthtest: listen: %w", err)
	}
	s := &Server{
		Addr:    lis.Addr().String(),
		nodes:   make(map[string]*berthv1.Node),
		pods:    make(map[string]*berthv1.Pod),
		podRevs: make(map[string]int64),
		changed: make(chan struct{}),
		maxPage: 5000,
		calls:   make(map[string]int),
		served:  make(chan struct{}),
	}
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(s.intercept))
	berthv1.RegisterClusterServiceServer(s.grpc, clusterService{s: s})
	berthv1.RegisterPodServiceServer(s.grpc, podService{s: s})
	berthv1.RegisterSchedulerServiceServer(s.grpc, schedulerService{s: s})
	go func() {
		defer close(s.served)
		_ = s.grpc.Serve(lis)
	}()
	return s, nil
}

// Stop closes the listener and every connection at once, and returns when
// the server's goroutines are gone.
func (s *Server) Stop() {
	s.grpc.Stop()
	<-s.served
}

// SetUnaryFault installs f (nil removes it).
func (s *Server) SetUnaryFault(f UnaryFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unaryFault = f
}

// SetResponseFault installs f (nil removes it).
func (s *Server) SetResponseFault(f ResponseFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respFault = f
}

// SetWatchFault installs f (nil removes it).
func (s *Server) SetWatchFault(f WatchFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchFault = f
}

// SetMaxPageSize caps list pages, to make small lists span several pages.
func (s *Server) SetMaxPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxPage = n
}

// Compact makes revisions below rev unavailable to new watches.
func (s *Server) Compact(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = rev
}

// Calls returns how many times method was called, failed calls included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// WatchRequests returns the from_revision of every WatchBindings call so far.
func (s *Server) WatchRequests() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.watchFroms)
}

// AddEvents appends events to the watch log as they are, revisions included
// (they must not decrease), and wakes the open streams.
func (s *Server) AddEvents(evs ...*berthv1.BindingEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		s.revision = max(s.revision, ev.GetRevision())
	}
	s.appendEventsLocked(evs...)
}

// Bind binds a stored pending pod to node at a new revision, as the
// scheduler would, and emits the BOUND event.
func (s *Server) Bind(namespace, name, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[namespace+"/"+name]
	if !ok {
		return fmt.Errorf("berthtest: no pod %s/%s", namespace, name)
	}
	s.revision++
	p.NodeName = node
	p.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND}
	s.appendEventsLocked(bindingEvent(berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, p, s.revision))
	return nil
}

func (s *Server) appendEventsLocked(evs ...*berthv1.BindingEvent) {
	s.events = append(s.events, evs...)
	close(s.changed)
	s.changed = make(chan struct{})
}

func bindingEvent(t berthv1.BindingEventType, p *berthv1.Pod, rev int64) *berthv1.BindingEvent {
	return &berthv1.BindingEvent{
		Type: t, Namespace: p.GetNamespace(), Name: p.GetName(), Uid: p.GetUid(),
		NodeName: p.GetNodeName(), Revision: rev,
	}
}

func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	s.mu.Lock()
	call := s.calls[info.FullMethod]
	s.calls[info.FullMethod]++
	fault, respFault := s.unaryFault, s.respFault
	s.mu.Unlock()
	if fault != nil {
		if err := fault(info.FullMethod, call); err != nil {
			return nil, err
		}
	}
	resp, err := handler(ctx, req)
	if err == nil && respFault != nil {
		if ferr := respFault(info.FullMethod, call); ferr != nil {
			return nil, ferr
		}
	}
	return resp, err
}

// invalid builds an InvalidArgument error with one BadRequest violation,
// the shape the real server uses for validation failures.
func invalid(field, description string) error {
	st := status.New(codes.InvalidArgument, fmt.Sprintf("invalid %s: %s", field, description))
	st, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: field, Description: description},
	}})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return st.Err()
}

// CompactedError builds the error a watch from a compacted revision gets:
// FailedPrecondition with the oldest revision both in an ErrorInfo and in
// the message.
func CompactedError(oldest int64) error {
	st := status.New(codes.FailedPrecondition,
		fmt.Sprintf("revision compacted; oldest available revision is %d", oldest))
	st, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   "REVISION_COMPACTED",
		Domain:   errorDomain,
		Metadata: map[string]string{"compact_revision": fmt.Sprint(oldest)},
	})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return st.Err()
}

// FellBehindError builds the error of a watch cut off for reading too
// slowly: ResourceExhausted with an ErrorInfo WATCH_FELL_BEHIND whose
// metadata resume_revision says where to resume.
func FellBehindError(resume int64) error {
	st := status.New(codes.ResourceExhausted,
		fmt.Sprintf("watch bindings: watch fell behind; resume from revision %d", resume))
	st, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   "WATCH_FELL_BEHIND",
		Domain:   errorDomain,
		Metadata: map[string]string{"resume_revision": fmt.Sprint(resume)},
	})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return st.Err()
}

// page returns the items after token, at most size (0: 500) capped by the
// server's maximum, and the next token.
func page[T any](s *Server, keys []string, items map[string]T, size int32, token string) ([]T, string) {
	slices.Sort(keys)
	limit := int(size)
	if limit <= 0 {
		limit = 500
	}
	limit = min(limit, s.maxPage)
	start, _ := slices.BinarySearch(keys, token)
	if token != "" && start < len(keys) && keys[start] == token {
		start++
	}
	end := min(start+limit, len(keys))
	out := make([]T, 0, end-start)
	for _, k := range keys[start:end] {
		out = append(out, items[k])
	}
	next := ""
	if end < len(keys) {
		next = keys[end-1]
	}
	return out, next
}

type clusterService struct {
	berthv1.UnimplementedClusterServiceServer
	s *Server
}

var _ berthv1.ClusterServiceServer = clusterService{}

func (c clusterService) UpsertNode(_ context.Context, req *berthv1.UpsertNodeRequest) (*berthv1.UpsertNodeResponse, error) {
	n := req.GetNode()
	if n.GetName() == "" {
		return nil, invalid("node.name", "must not be empty")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revision++
	s.nodes[n.GetName()] = proto.CloneOf(n)
	return &berthv1.UpsertNodeResponse{Node: proto.CloneOf(n), Revision: s.revision}, nil
}

func (c clusterService) DeleteNode(_ context.Context, req *berthv1.DeleteNodeRequest) (*berthv1.DeleteNodeResponse, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[req.GetName()]; !ok {
		return nil, status.Errorf(codes.NotFound, "node %q not found", req.GetName())
	}
	delete(s.nodes, req.GetName())
	s.revision++
	return &berthv1.DeleteNodeResponse{Revision: s.revision}, nil
}

func (c clusterService) GetNode(_ context.Context, req *berthv1.GetNodeRequest) (*berthv1.GetNodeResponse, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "node %q not found", req.GetName())
	}
	usage := &berthv1.NodeUsage{Requested: map[string]int64{}}
	for _, p := range s.pods {
		if p.GetNodeName() != n.GetName() {
			continue
		}
		usage.PodCount++
		for _, ctr := range p.GetContainers() {
			for r, v := range ctr.GetRequests() {
				usage.Requested[r] += v
			}
		}
	}
	return &berthv1.GetNodeResponse{Node: proto.CloneOf(n), Usage: usage}, nil
}

func (c clusterService) ListNodes(_ context.Context, req *berthv1.ListNodesRequest) (*berthv1.ListNodesResponse, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes, next := page(s, mapKeys(s.nodes), s.nodes, req.GetPageSize(), req.GetPageToken())
	for i, n := range nodes {
		nodes[i] = proto.CloneOf(n)
	}
	return &berthv1.ListNodesResponse{Nodes: nodes, NextPageToken: next}, nil
}

type schedulerService struct {
	berthv1.UnimplementedSchedulerServiceServer
	s *Server
}

var _ berthv1.SchedulerServiceServer = schedulerService{}

// WatchBindings replays the log after from_revision (all of it for 0), then
// follows it until the client goes away or a WatchFault ends the stream.
func (w schedulerService) WatchBindings(req *berthv1.WatchBindingsRequest, stream grpc.ServerStreamingServer[berthv1.WatchBindingsResponse]) error {
	s := w.s
	from := req.GetFromRevision()
	s.mu.Lock()
	streamNo := len(s.watchFroms)
	s.watchFroms = append(s.watchFroms, from)
	if from > 0 && from < s.compacted {
		oldest := s.compacted
		s.mu.Unlock()
		return CompactedError(oldest)
	}
	next := 0
	// A from-0 watch treats the log present now as its listing and marks
	// its end with a progress message, as the real server does.
	listing, listingRev := -1, int64(0)
	if from == 0 {
		listing = len(s.events)
		if listing > 0 {
			listingRev = s.events[listing-1].GetRevision()
		}
	}
	if from > 0 {
		next = len(s.events)
		for i, ev := range s.events {
			if ev.GetRevision() > from {
				next = i
				break
			}
		}
	}
	s.mu.Unlock()

	ctx := stream.Context()
	for sent := 0; ; sent++ {
		if next == listing {
			listing = -1
			if err := stream.Send(&berthv1.WatchBindingsResponse{ProgressRevision: max(listingRev, 1)}); err != nil {
				return err
			}
		}
		s.mu.Lock()
		for next >= len(s.events) {
			changed := s.changed
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			case <-changed:
			}
			s.mu.Lock()
		}
		ev := s.events[next]
		fault := s.watchFault
		s.mu.Unlock()
		if fault != nil {
			if err := fault(streamNo, sent); errors.Is(err, ErrEndStream) {
				return nil
			} else if err != nil {
				return err
			}
		}
		if err := stream.Send(&berthv1.WatchBindingsResponse{Event: ev}); err != nil {
			return err
		}
		next++
	}
}

func mapKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
